/* json.c — JSON string escaping and numbers (json.h). */
#include "json.h"

#include <math.h>

void tsr_json_string(FILE* out, const char* s) {
  if (!s) {
    fputs("null", out);
    return;
  }
  fputc('"', out);
  for (const unsigned char* p = (const unsigned char*)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(out, "\\%c", *p);
    else if (*p < 0x20) fprintf(out, "\\u%04x", *p);
    else fputc(*p, out);
  }
  fputc('"', out);
}

void tsr_json_number(FILE* out, double value) {
  if (isfinite(value)) fprintf(out, "%.9g", value);
  else fputs("null", out);
}

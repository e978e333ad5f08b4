/* json.h — the little JSON the runtime writes (metrics records, crash captures): escaped strings and finite
 * numbers. */
#ifndef TESSERA_SRC_JSON_H_
#define TESSERA_SRC_JSON_H_

#include <stdio.h>

/* Writes `s` as a JSON string literal, escaping quotes, backslashes and control bytes. NULL writes null. */
void tsr_json_string(FILE* out, const char* s);

/* Writes a number, or null when it is not finite (JSON has no NaN or infinity). */
void tsr_json_number(FILE* out, double value);

#endif  /* TESSERA_SRC_JSON_H_ */

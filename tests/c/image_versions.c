/* image_versions.c — prints what the C loader reads of an image's IR version note and whether it would read
 * the image's launch plans (tests/c/test_image_versions.py): `image_versions FILE`. */
#include <stdio.h>
#include <stdlib.h>

#include "image.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  FILE* f = fopen(argv[1], "rb");
  if (!f) return 2;
  static unsigned char buf[1 << 22];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  tsr_image_t img;
  if (tsr_image_parse(buf, n, &img) != TSR_SUCCESS) {
    printf("ERR %s\n", tsrGetLastErrorMessage());
    return 1;
  }
  if (img.has_versions)
    printf("versions %u.%u %u %u\n", img.ir_major, img.ir_minor, img.bytecode_version, img.plan_version);
  else
    printf("versions none\n");
  if (tsr_image_check_plan_version(&img) == TSR_SUCCESS) printf("plan OK\n");
  else printf("plan ERR %s\n", tsrGetLastErrorMessage());
  tsr_image_release(&img);
  return 0;
}

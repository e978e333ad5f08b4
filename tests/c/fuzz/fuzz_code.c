/* fuzz_code.c — libFuzzer target: the checks of a CPU code section's shared object (runtime/src/cpu_elf.c).
 *
 * Each input is a shared object, seeded with the test image's and a compiled image's. The checks read only
 * what they have bounded: a sanitizer report or a crash is a bug, a refusal is the expected outcome. What the
 * checks accept is what the system's loader would be handed: host_code_mutations.c loads such objects for
 * real, with mutations aimed at the structures these checks cover. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_elf.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  /* a copy of exactly `size` bytes, so that any read past the end is the sanitizer's to see */
  uint8_t* copy = malloc(size ? size : 1);
  if (!copy) return 0;
  memcpy(copy, data, size);
  tsr_cpu_check_shared_object(copy, size, ".tessera.code.cpu");
  free(copy);
  return 0;
}

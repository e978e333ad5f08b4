/* fuzz_input.h — the fuzz targets' reading of their input: bytes taken from the front, zeros once it runs out
 * (so every input, however short, is a whole test case). */
#ifndef TESSERA_FUZZ_INPUT_H_
#define TESSERA_FUZZ_INPUT_H_

#include <stddef.h>
#include <stdint.h>

typedef struct input {
  const uint8_t* p;
  size_t n;
} input_t;

static inline uint8_t u8(input_t* in) {
  if (!in->n) return 0;
  in->n--;
  return *in->p++;
}

static inline uint16_t u16(input_t* in) { return (uint16_t)(u8(in) | u8(in) << 8); }

static inline uint64_t u64(input_t* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | u8(in);
  return v;
}

#endif  /* TESSERA_FUZZ_INPUT_H_ */

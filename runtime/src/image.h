/* image.h — a validated view of a `.tessera` image in memory (docs/image-format.md).
 *
 * tsr_image_parse checks everything a loader relies on: ELF header and section table bounds, section overlap,
 * required sections, the ABI note, and every table, index and string of `.tessera.meta`. After it succeeds,
 * every offset below is in range and every string offset names a NUL-terminated string of the strtab.
 * The view points into the caller's buffer (sections, strtab); the parsed tables are owned by the view. */
#ifndef TESSERA_SRC_IMAGE_H_
#define TESSERA_SRC_IMAGE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/tessera.h"

typedef struct tsr_image_section {
  const char* name;     /* into the image's .shstrtab */
  uint32_t type;
  const uint8_t* data;  /* into the image; NULL when size is 0 */
  uint64_t size;
} tsr_image_section_t;

/* A kernel record; string fields are offsets into the strtab. */
typedef struct tsr_image_kernel {
  uint32_t name, entry, target, arch, section;
  uint32_t arg_first, arg_count;
  uint32_t block[3];
  uint32_t warp_size, smem_bytes, regs, flags;
  uint32_t prop_first, prop_count;
} tsr_image_kernel_t;

/* An argument record; `name` is a strtab offset. */
typedef struct tsr_image_arg {
  uint32_t name;
  uint8_t kind, dtype;
  uint16_t rank;
  uint32_t dims_first, flags;
} tsr_image_arg_t;

/* A property record: key and value are strtab offsets. */
typedef struct tsr_image_prop {
  uint32_t key, value;
} tsr_image_prop_t;

typedef struct tsr_image {
  uint32_t abi_major, abi_minor;
  /* The IR version note (docs/image-format.md, "Versions"): what `.tessera.ops` and `.tessera.plan` are;
   * has_versions false and all 0 for an image made before the note existed (version 0). */
  bool has_versions;
  uint32_t ir_major, ir_minor, bytecode_version, plan_version;
  uint16_t section_count;
  tsr_image_section_t* sections;
  const char* strtab;  /* the .tessera.strtab section */
  size_t strtab_size;
  uint32_t kernel_count, arg_count, dim_count, prop_count;
  tsr_image_kernel_t* kernels;
  tsr_image_arg_t* args;
  int64_t* dims;
  tsr_image_prop_t* props;
} tsr_image_t;

/* Validates and parses. TSR_ERROR_BAD_IMAGE, TSR_ERROR_ABI_MISMATCH or TSR_ERROR_OUT_OF_MEMORY with a
 * message; on failure nothing needs releasing. */
tsr_status_t tsr_image_parse(const void* data, size_t size, tsr_image_t* out);

/* The one section of that name, or NULL (message set) when it is missing or present more than once. */
const tsr_image_section_t* tsr_image_find_section(const tsr_image_t* image, const char* name);

/* A validated strtab offset as a string. */
static inline const char* tsr_image_str(const tsr_image_t* image, uint32_t offset) {
  return image->strtab + offset;
}

/* Whether this runtime reads the image's `.tessera.plan` by the compatibility rule (docs/image-format.md,
 * "Versions": the recorded plan version is TSR_PLAN_VERSION_MIN to TSR_PLAN_VERSION). TSR_SUCCESS, or TSR_ERROR_BAD_IMAGE with a
 * message naming both versions (or that the image records none); a reader of the plan section calls it first. */
tsr_status_t tsr_image_check_plan_version(const tsr_image_t* image);

void tsr_image_release(tsr_image_t* image);

#endif  /* TESSERA_SRC_IMAGE_H_ */

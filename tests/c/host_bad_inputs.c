/* host_bad_inputs.c — feeds libtessera broken images and API misuse, and checks that each is refused with its
 * documented status while the process lives on.
 *
 *   host_bad_inputs IMAGE      IMAGE: the test image of make_image.py (kernels saxpy, fill_fixed, gpu_only)
 *
 * Prints one line per check; exits with the number of failed checks. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

static int failures;

static void expect(const char* what, tsr_status_t got, tsr_status_t want) {
  bool ok = got == want;
  failures += !ok;
  printf("%-4s %-52s %s%s%s  %s\n", ok ? "ok" : "FAIL", what, tsrGetStatusName(got), ok ? "" : " want ",
         ok ? "" : tsrGetStatusName(want), got ? tsrGetLastErrorMessage() : "");
}

/* Also checks that the last error message mentions `needle`. */
static void expect_msg(const char* what, tsr_status_t got, tsr_status_t want, const char* needle) {
  expect(what, got, want);
  if (got == want && !strstr(tsrGetLastErrorMessage(), needle)) {
    failures++;
    printf("FAIL %-52s message lacks '%s'\n", what, needle);
  }
}

/* ---- image bytes -------------------------------------------------------------------------------------- */

typedef struct image {
  uint8_t* data;
  size_t size;
} image_t;

static uint64_t get(const uint8_t* p, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void put(uint8_t* p, int width, uint64_t v) {
  for (int i = 0; i < width; i++, v >>= 8) p[i] = (uint8_t)v;
}

static image_t copy_of(image_t img) {
  image_t c = {malloc(img.size), img.size};
  memcpy(c.data, img.data, img.size);
  return c;
}

/* The section header of `name` in a well-formed image (this host trusts its own input). */
static uint8_t* shdr(image_t img, const char* name) {
  uint64_t shoff = get(img.data + 40, 8), shnum = get(img.data + 60, 2), shstrndx = get(img.data + 62, 2);
  const char* names = (const char*)img.data + get(img.data + shoff + shstrndx * 64 + 24, 8);
  for (uint64_t i = 0; i < shnum; i++) {
    uint8_t* sh = img.data + shoff + i * 64;
    if (strcmp(names + get(sh, 4), name) == 0) return sh;
  }
  fprintf(stderr, "test image has no section %s\n", name);
  exit(2);
}

static uint8_t* section(image_t img, const char* name) { return img.data + get(shdr(img, name) + 24, 8); }
static uint64_t section_size(image_t img, const char* name) { return get(shdr(img, name) + 32, 8); }

/* Replaces the first occurrence of `from` inside [begin, begin + size) by `to` (same length). */
static void replace(uint8_t* begin, size_t size, const char* from, const char* to) {
  size_t n = strlen(from);
  for (size_t i = 0; i + n <= size; i++)
    if (memcmp(begin + i, from, n) == 0) {
      memcpy(begin + i, to, n);
      return;
    }
  fprintf(stderr, "test image lacks the string %s\n", from);
  exit(2);
}

static tsr_context_t ctx;

/* Loads, and unloads again on success; returns the load's status. */
static tsr_status_t load(image_t img) {
  tsr_module_t m;
  tsr_status_t st = tsrLoadModule(ctx, img.data, img.size, &m);
  if (st == TSR_SUCCESS) tsrUnloadModule(m);
  return st;
}

/* ---- one-field corruptions ---------------------------------------------------------------------------- */

enum where { FILE_AT, SHDR_OF, DATA_OF, META_ARGS, META_DIMS };

typedef struct patch {
  const char* what;
  enum where where;
  const char* section;
  size_t offset;
  int width;
  uint64_t value;
  tsr_status_t want;
} patch_t;

#define META ".tessera.meta"
#define NOTE ".note.tessera"
#define CODE ".tessera.code.cpu"
#define BAD TSR_ERROR_BAD_IMAGE
#define ABI TSR_ERROR_ABI_MISMATCH

static const patch_t patches[] = {
    {"ELF magic", FILE_AT, NULL, 1, 1, 'X', BAD},
    {"ELFCLASS32", FILE_AT, NULL, 4, 1, 1, BAD},
    {"big-endian", FILE_AT, NULL, 5, 1, 2, BAD},
    {"e_type ET_DYN", FILE_AT, NULL, 16, 2, 3, BAD},
    {"e_machine x86-64", FILE_AT, NULL, 18, 2, 62, BAD},
    {"e_shoff past the end", FILE_AT, NULL, 40, 8, 1ull << 40, BAD},
    {"e_shoff inside the ELF header", FILE_AT, NULL, 40, 8, 8, BAD},
    {"e_shoff near 2^64", FILE_AT, NULL, 40, 8, ~0ull - 10, BAD},
    {"e_shentsize 40", FILE_AT, NULL, 58, 2, 40, BAD},
    {"e_shnum 0", FILE_AT, NULL, 60, 2, 0, BAD},
    {"e_shnum 0xffff", FILE_AT, NULL, 60, 2, 0xffff, BAD},
    {"e_shstrndx out of range", FILE_AT, NULL, 62, 2, 999, BAD},
    {"e_shstrndx 0", FILE_AT, NULL, 62, 2, 0, BAD},
    {"meta offset past the end", SHDR_OF, META, 24, 8, 1ull << 32, BAD},
    {"meta offset 0 (over the ELF header)", SHDR_OF, META, 24, 8, 0, BAD},
    {"meta size past the end", SHDR_OF, META, 32, 8, 1 << 20, BAD},
    {"code size 2^63", SHDR_OF, CODE, 32, 8, 1ull << 63, BAD},
    /* a size that ends the code inside its segments: dlopen would map bytes past the end and fault (SIGBUS),
     * found by the random changes below when the test image's layout moved */
    {"code cut short of its segments", SHDR_OF, CODE, 32, 8, 4096, BAD},
    {"meta offset + size wraps", SHDR_OF, META, 32, 8, ~0ull, BAD},
    {"section name offset out of range", SHDR_OF, META, 0, 4, 0xfffffff, BAD},
    {"strtab not SHT_STRTAB", SHDR_OF, ".tessera.strtab", 4, 4, 1, BAD},
    {"note not SHT_NOTE", SHDR_OF, NOTE, 4, 4, 1, BAD},
    {"meta SHT_NOBITS", SHDR_OF, META, 4, 4, 8, BAD},
    {"ABI major 2", DATA_OF, NOTE, 20, 4, 2, ABI},
    {"ABI major 0", DATA_OF, NOTE, 20, 4, 0, ABI},
    {"ABI minor 1", DATA_OF, NOTE, 24, 4, 1, ABI},
    {"note namesz 2^32-1", DATA_OF, NOTE, 0, 4, 0xffffffff, BAD},
    {"note descsz 4", DATA_OF, NOTE, 4, 4, 4, BAD},
    {"note type 2 (no ABI note)", DATA_OF, NOTE, 8, 4, 2, BAD},
    {"note owner 'Tesserb'", DATA_OF, NOTE, 18, 1, 'b', BAD},
    {"meta magic", DATA_OF, META, 0, 1, 'X', BAD},
    {"meta layout major 2", DATA_OF, META, 4, 2, 2, BAD},
    {"meta kernel_count 2^31", DATA_OF, META, 8, 4, 1u << 31, BAD},
    {"meta kernel_count 2^32-1", DATA_OF, META, 8, 4, 0xffffffff, BAD},
    {"meta kernel_size 8", DATA_OF, META, 12, 4, 8, BAD},
    {"meta kernel_size 2^32-1", DATA_OF, META, 12, 4, 0xffffffff, BAD},
    {"meta arg_count 2^30", DATA_OF, META, 16, 4, 1u << 30, BAD},
    {"meta arg_size 4", DATA_OF, META, 20, 4, 4, BAD},
    {"meta dim_count 2^32-1", DATA_OF, META, 24, 4, 0xffffffff, BAD},
    {"meta prop_count 2^31", DATA_OF, META, 28, 4, 1u << 31, BAD},
    {"kernel 0: name outside strtab", DATA_OF, META, 32 + 0, 4, 0xffffff, BAD},
    {"kernel 0: empty name", DATA_OF, META, 32 + 0, 4, 0, BAD},
    {"kernel 0: empty section", DATA_OF, META, 32 + 16, 4, 0, BAD},
    {"kernel 0: arguments past the table", DATA_OF, META, 32 + 20, 4, 0xfffffff0, BAD},
    {"kernel 0: arg_count past the table", DATA_OF, META, 32 + 24, 4, 1000, BAD},
    {"kernel 0: properties past the table", DATA_OF, META, 32 + 56, 4, 0xffffffff, BAD},
    {"arg 0: name outside strtab", META_ARGS, NULL, 0, 4, 0xffffff, BAD},
    {"arg 0: kind 3", META_ARGS, NULL, 4, 1, 3, BAD},
    {"arg 0: dtype 99", META_ARGS, NULL, 5, 1, 99, BAD},
    {"arg 0: scalar with rank 2", META_ARGS, NULL, 6, 2, 2, BAD},
    {"arg 1: dims past the table", META_ARGS, NULL, 16 + 8, 4, 0xffff, BAD},
    {"dim 0 refers to argument 99", META_DIMS, NULL, 0, 8, (uint64_t)-100, BAD},
    {"dim 0 refers to a scalar", META_DIMS, NULL, 0, 8, (uint64_t)-1, BAD},
    {"dim 0 is INT64_MIN", META_DIMS, NULL, 0, 8, 1ull << 63, BAD},
    {"code: not ELF", DATA_OF, CODE, 0, 1, 0, BAD},
    {"code: ET_EXEC", DATA_OF, CODE, 16, 2, 2, BAD},
    {"code: another machine", DATA_OF, CODE, 18, 2, 0x1234, BAD},
    {"code: program headers past the end", DATA_OF, CODE, 32, 8, 1ull << 40, BAD},
};

static void apply(image_t img, const patch_t* p) {
  uint8_t* at = img.data + p->offset;
  uint8_t* meta = section(img, META);
  uint64_t args = 32 + get(meta + 8, 4) * get(meta + 12, 4);
  uint64_t dims = args + get(meta + 16, 4) * get(meta + 20, 4);
  switch (p->where) {
    case FILE_AT: break;
    case SHDR_OF: at = shdr(img, p->section) + p->offset; break;
    case DATA_OF: at = section(img, p->section) + p->offset; break;
    case META_ARGS: at = meta + args + p->offset; break;
    case META_DIMS: at = meta + dims + p->offset; break;
  }
  put(at, p->width, p->value);
}

static void check_images(image_t good) {
  expect("the good image", load(good), TSR_SUCCESS);

  for (size_t i = 0; i < sizeof patches / sizeof patches[0]; i++) {
    image_t bad = copy_of(good);
    apply(bad, &patches[i]);
    expect(patches[i].what, load(bad), patches[i].want);
    free(bad.data);
  }

  /* Every proper prefix of the image. */
  size_t refused = 0;
  for (size_t n = 0; n < good.size; n++) {
    image_t cut = {malloc(n ? n : 1), n};
    memcpy(cut.data, good.data, n);
    refused += load(cut) == BAD;
    free(cut.data);
  }
  printf("%-4s %-52s %zu of %zu refused\n", refused == good.size ? "ok" : "FAIL", "every truncation", refused,
         good.size);
  failures += refused != good.size;

  tsr_module_t m;
  expect("NULL image", tsrLoadModule(ctx, NULL, 100, &m), TSR_ERROR_INVALID_VALUE);
  expect("NULL output module", tsrLoadModule(ctx, good.data, good.size, NULL), TSR_ERROR_INVALID_VALUE);

  image_t bad = copy_of(good);
  replace(section(bad, ".shstrtab"), section_size(bad, ".shstrtab"), ".tessera.meta", ".tessera.mexa");
  expect("missing .tessera.meta", load(bad), BAD);
  free(bad.data);

  bad = copy_of(good);
  put(shdr(bad, META) + 24, 8, get(shdr(bad, ".tessera.strtab") + 24, 8));
  expect_msg("meta overlaps strtab", load(bad), BAD, "overlaps");
  free(bad.data);

  bad = copy_of(good);
  section(bad, ".tessera.strtab")[section_size(bad, ".tessera.strtab") - 1] = 'x';
  expect_msg("unterminated strtab", load(bad), BAD, "unterminated");
  free(bad.data);

  bad = copy_of(good);
  replace(section(bad, ".tessera.strtab"), section_size(bad, ".tessera.strtab"), "saxpy_entry", "saxpy_entrz");
  expect_msg("entry symbol missing from the code", load(bad), BAD, "saxpy_entrz");
  free(bad.data);

  /* Random byte changes outside the code section (the system's dynamic loader is not ours to fuzz). */
  uint64_t code_begin = get(shdr(good, CODE) + 24, 8), code_end = code_begin + section_size(good, CODE);
  uint64_t state = 0x9e3779b97f4a7c15ull;
  size_t loaded = 0, runs = 3000;
  for (size_t r = 0; r < runs; r++) {
    bad = copy_of(good);
    for (int flips = 1 + r % 4; flips; flips--) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      uint64_t at = (state >> 16) % bad.size;
      if (at >= code_begin && at < code_end) continue;
      bad.data[at] = (uint8_t)(state >> 56);
    }
    loaded += load(bad) == TSR_SUCCESS;
    free(bad.data);
  }
  printf("ok   %-52s %zu runs, %zu still loadable, no crash\n", "random byte changes", runs, loaded);
}

/* ---- API misuse --------------------------------------------------------------------------------------- */

static const tsr_launch_t grid1 = {1, 1, 1, 64, 1, 1, 0};

static void check_launches(tsr_module_t m) {
  tsr_kernel_t saxpy, fill;
  expect("get saxpy", tsrGetKernel(m, "saxpy", &saxpy), TSR_SUCCESS);
  expect("get fill_fixed", tsrGetKernel(m, "fill_fixed", &fill), TSR_SUCCESS);
  tsr_kernel_t k;
  expect_msg("missing kernel name", tsrGetKernel(m, "nope", &k), TSR_ERROR_NOT_FOUND, "no kernel named 'nope'");
  expect_msg("kernel only for ptx", tsrGetKernel(m, "gpu_only", &k), TSR_ERROR_NOT_FOUND, "ptx/sm_90a");
  expect("NULL kernel name", tsrGetKernel(m, NULL, &k), TSR_ERROR_INVALID_VALUE);
  expect("context passed as module", tsrGetKernel((tsr_module_t)(void*)ctx, "saxpy", &k), TSR_ERROR_INVALID_HANDLE);
  const char* name;
  expect("kernel name index out of range", tsrModuleGetKernelName(m, 99, &name), TSR_ERROR_INVALID_VALUE);
  tsr_arg_info_t info;
  expect("arg info index out of range", tsrKernelGetArgInfo(saxpy, 4, &info), TSR_ERROR_INVALID_VALUE);
  int64_t value;
  expect("unknown kernel attribute", tsrKernelGetAttribute(saxpy, (tsr_kernel_attribute_t)99, &value),
         TSR_ERROR_INVALID_VALUE);

  float a = 2, x[64], y[64];
  for (int i = 0; i < 64; i++) x[i] = (float)i, y[i] = 1;
  float *px = x, *py = y, *null_buffer = NULL;
  int64_t n = 64, negative = -1;
  void* args[] = {&a, &px, &py, &n};

  expect_msg("wrong nargs", tsrLaunch(saxpy, NULL, grid1, args, 3), TSR_ERROR_INVALID_VALUE,
             "kernel 'saxpy' expects 4 arguments, got 3");
  expect("NULL args array", tsrLaunch(saxpy, NULL, grid1, NULL, 4), TSR_ERROR_INVALID_VALUE);
  void* null_slot[] = {&a, NULL, &py, &n};
  expect("NULL argument slot", tsrLaunch(saxpy, NULL, grid1, null_slot, 4), TSR_ERROR_INVALID_VALUE);
  void* null_tensor[] = {&a, &null_buffer, &py, &n};
  expect_msg("NULL tensor buffer", tsrLaunch(saxpy, NULL, grid1, null_tensor, 4), TSR_ERROR_INVALID_VALUE, "'x'");
  void* negative_dim[] = {&a, &px, &py, &negative};
  expect("negative dimension", tsrLaunch(saxpy, NULL, grid1, negative_dim, 4), TSR_ERROR_INVALID_VALUE);
  tsr_launch_t l = grid1;
  l.grid_x = 0;
  expect("grid_x 0", tsrLaunch(saxpy, NULL, l, args, 4), TSR_ERROR_INVALID_VALUE);
  l = grid1;
  l.block_z = 0;
  expect("block_z 0", tsrLaunch(saxpy, NULL, l, args, 4), TSR_ERROR_INVALID_VALUE);
  l = grid1;
  l.block_x = 2048;
  expect("2048 threads per block", tsrLaunch(saxpy, NULL, l, args, 4), TSR_ERROR_INVALID_VALUE);
  l = grid1;
  l.smem_bytes = TSR_CPU_MAX_SMEM_BYTES + 1;
  expect("shared memory over the limit", tsrLaunch(saxpy, NULL, l, args, 4), TSR_ERROR_INVALID_VALUE);
  l = grid1;
  l.grid_x = l.grid_y = l.grid_z = 0xffffffffu;
  expect("2^96 blocks", tsrLaunch(saxpy, NULL, l, args, 4), TSR_ERROR_INVALID_VALUE);
  expect("non-NULL stream", tsrLaunch(saxpy, (tsr_stream_t)(void*)&a, grid1, args, 4), TSR_ERROR_INVALID_HANDLE);
  expect("NULL kernel", tsrLaunch(NULL, NULL, grid1, args, 4), TSR_ERROR_INVALID_HANDLE);
  expect("module passed as kernel", tsrLaunch((tsr_kernel_t)(void*)m, NULL, grid1, args, 4), TSR_ERROR_INVALID_HANDLE);
  for (int i = 0; i < 64; i++)
    if (y[i] != 1) {
      failures++;
      printf("FAIL refused launches left y untouched\n");
      break;
    }
  expect("saxpy after all that", tsrLaunch(saxpy, NULL, grid1, args, 4), TSR_SUCCESS);
  failures += y[63] != 2 * 63 + 1;

  float out[100] = {0}, *pout = out, v = 7;
  int64_t count = 100;
  void* fill_args[] = {&pout, &v, &count};
  tsr_launch_t fl = {2, 1, 1, 32, 1, 1, 0};
  expect_msg("block other than the compiled one", tsrLaunch(fill, NULL, fl, fill_args, 3), TSR_ERROR_INVALID_VALUE,
             "compiled for block (64, 1, 1)");
  fl.block_x = 64;
  fl.smem_bytes = TSR_CPU_MAX_SMEM_BYTES - 1024 + 1; /* fill_fixed has 1024 bytes of static shared memory */
  expect("static + dynamic shared memory over", tsrLaunch(fill, NULL, fl, fill_args, 3), TSR_ERROR_INVALID_VALUE);
  fl.smem_bytes = 0;
  expect("fill_fixed with its block", tsrLaunch(fill, NULL, fl, fill_args, 3), TSR_SUCCESS);
  failures += out[0] != 7 || out[99] != 7;
}

static void check_memory(void) {
  void *p, *q;
  int on_stack;
  expect("tsrAlloc 100 bytes", tsrAlloc(ctx, 100, TSR_ALLOC_DEFAULT, &p), TSR_SUCCESS);
  if ((uintptr_t)p % TSR_ALLOC_ALIGNMENT) {
    failures++;
    printf("FAIL tsrAlloc result %p is not %u-aligned\n", p, TSR_ALLOC_ALIGNMENT);
  }
  expect("tsrAlloc 0 bytes", tsrAlloc(ctx, 0, TSR_ALLOC_DEFAULT, &q), TSR_SUCCESS);
  expect("tsrAlloc unknown flags", tsrAlloc(ctx, 8, 7, &q), TSR_ERROR_INVALID_VALUE);
  expect("tsrAlloc NULL output", tsrAlloc(ctx, 8, 0, NULL), TSR_ERROR_INVALID_VALUE);
  expect("tsrAlloc SIZE_MAX bytes", tsrAlloc(ctx, SIZE_MAX, 0, &q), TSR_ERROR_OUT_OF_MEMORY);
  char host[200];
  expect("memcpy into the allocation", tsrMemcpy(ctx, p, host, 100, TSR_MEMCPY_HOST_TO_DEVICE), TSR_SUCCESS);
  expect("memcpy past the allocation", tsrMemcpy(ctx, p, host, 101, TSR_MEMCPY_HOST_TO_DEVICE), TSR_ERROR_INVALID_VALUE);
  expect("memcpy from a host pointer as device", tsrMemcpy(ctx, host, host + 100, 10, TSR_MEMCPY_DEVICE_TO_HOST),
         TSR_ERROR_INVALID_VALUE);
  expect("memcpy NULL source", tsrMemcpy(ctx, host, NULL, 10, TSR_MEMCPY_HOST_TO_HOST), TSR_ERROR_INVALID_VALUE);
  expect("memcpy unknown kind", tsrMemcpy(ctx, host, host, 10, (tsr_memcpy_kind_t)99), TSR_ERROR_INVALID_VALUE);
  expect("tsrFree a stack pointer", tsrFree(ctx, &on_stack), TSR_ERROR_INVALID_VALUE);
  expect("tsrFree an interior pointer", tsrFree(ctx, (char*)p + 1), TSR_ERROR_INVALID_VALUE);
  expect("tsrFree NULL", tsrFree(ctx, NULL), TSR_ERROR_INVALID_VALUE);
  expect("tsrFree", tsrFree(ctx, p), TSR_SUCCESS);
  expect("tsrFree twice", tsrFree(ctx, p), TSR_ERROR_INVALID_VALUE);
  /* q (0 bytes) is left for tsrDestroyContext to free. */
}

static void check_lifetimes(image_t good) {
  tsr_module_t m;
  tsr_kernel_t k;
  size_t n;
  expect("load", tsrLoadModule(ctx, good.data, good.size, &m), TSR_SUCCESS);
  expect("get saxpy", tsrGetKernel(m, "saxpy", &k), TSR_SUCCESS);
  expect("unload", tsrUnloadModule(m), TSR_SUCCESS);
  expect("unload twice", tsrUnloadModule(m), TSR_ERROR_INVALID_HANDLE);
  expect("kernel of an unloaded module", tsrKernelGetArgCount(k, &n), TSR_ERROR_INVALID_HANDLE);
  expect("launch of an unloaded module", tsrLaunch(k, NULL, grid1, NULL, 0), TSR_ERROR_INVALID_HANDLE);

  /* An invalid TESSERA_NUM_THREADS is reported by the launch that starts the pool, which later launches retry. */
  tsr_context_t c2;
  expect("second context", tsrCreateContext(&c2), TSR_SUCCESS);
  expect("load into it", tsrLoadModule(c2, good.data, good.size, &m), TSR_SUCCESS);
  expect("get saxpy", tsrGetKernel(m, "saxpy", &k), TSR_SUCCESS);
  float a = 1, x = 1, y = 1, *px = &x, *py = &y;
  int64_t one = 1;
  void* args[] = {&a, &px, &py, &one};
  tsr_launch_t l = {1, 1, 1, 1, 1, 1, 0};
  setenv("TESSERA_NUM_THREADS", "lots", 1);
  expect_msg("TESSERA_NUM_THREADS=lots", tsrLaunch(k, NULL, l, args, 4), TSR_ERROR_INVALID_VALUE, "TESSERA_NUM_THREADS");
  setenv("TESSERA_NUM_THREADS", "3", 1);
  expect("TESSERA_NUM_THREADS=3", tsrLaunch(k, NULL, l, args, 4), TSR_SUCCESS);
  unsetenv("TESSERA_NUM_THREADS");
  void* mem;
  expect("allocation left to the context", tsrAlloc(c2, 1000, 0, &mem), TSR_SUCCESS);
  expect("destroy with a module and memory", tsrDestroyContext(c2), TSR_SUCCESS);
  expect("destroy twice", tsrDestroyContext(c2), TSR_ERROR_INVALID_HANDLE);
  expect("module of a destroyed context", tsrModuleGetKernelCount(m, &n), TSR_ERROR_INVALID_HANDLE);
  expect("kernel of a destroyed context", tsrLaunch(k, NULL, l, args, 4), TSR_ERROR_INVALID_HANDLE);
  expect("alloc on a destroyed context", tsrAlloc(c2, 8, 0, &mem), TSR_ERROR_INVALID_HANDLE);
  expect("synchronize a destroyed context", tsrSynchronize(c2), TSR_ERROR_INVALID_HANDLE);

  expect("NULL context: load", tsrLoadModule(NULL, good.data, good.size, &m), TSR_ERROR_INVALID_HANDLE);
  expect("NULL context: destroy", tsrDestroyContext(NULL), TSR_ERROR_INVALID_HANDLE);
  expect("NULL context: free", tsrFree(NULL, NULL), TSR_ERROR_INVALID_HANDLE);
  expect("NULL output context", tsrCreateContext(NULL), TSR_ERROR_INVALID_VALUE);

  tessera_context_handle draft;
  expect("tessera_context_create", (tsr_status_t)tessera_context_create(&draft), TESSERA_SUCCESS);
  expect("tessera_context_destroy", (tsr_status_t)tessera_context_destroy(draft), TESSERA_SUCCESS);
  expect("tessera_context_destroy twice", (tsr_status_t)tessera_context_destroy(draft), TESSERA_ERROR_INVALID_HANDLE);

  if (strcmp(tsrGetErrorString((tsr_status_t)999), "unknown status code") != 0 ||
      strcmp(tsrGetStatusName((tsr_status_t)-1), "TSR_STATUS_UNKNOWN") != 0) {
    failures++;
    printf("FAIL unknown status strings\n");
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s TEST_IMAGE\n", argv[0]);
    return 2;
  }
  FILE* f = fopen(argv[1], "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", argv[1]);
    return 2;
  }
  fseek(f, 0, SEEK_END);
  image_t good = {NULL, (size_t)ftell(f)};
  rewind(f);
  good.data = malloc(good.size);
  if (fread(good.data, 1, good.size, f) != good.size) return 2;
  fclose(f);

  if (tsrCreateContext(&ctx) != TSR_SUCCESS) return 2;
  check_images(good);
  tsr_module_t m;
  expect("load the good image", tsrLoadModule(ctx, good.data, good.size, &m), TSR_SUCCESS);
  check_launches(m);
  check_memory();
  check_lifetimes(good);
  expect("destroy the context", tsrDestroyContext(ctx), TSR_SUCCESS);
  free(good.data);
  printf("%d failed\n", failures);
  return failures;
}

/* mock_hip.c — a fake libamdhip64 for testing libtessera's HIP loader (runtime/src/hip_*.c) where there is no
 * AMD GPU: it exports the HIP entry points the loader resolves, logs each call (mock_common.h), fails on
 * request, and keeps "device" memory on the host.
 *
 * It checks what a real HIP would: hipModuleLoadData takes an AMDGPU ELF code object (ELF64, e_machine
 * EM_AMDGPU) and hipModuleGetFunction finds the kernel among its dynamic symbols. Device 0 is described by
 * MOCK_HIP_ARCH (default "gfx942:sramecc+:xnack-") and MOCK_HIP_WARP (default 64); MOCK_HIP_DEVICES is the
 * device count (default 1). Built with -DMOCK_HIP_ROCM5 it lacks hipGetDevicePropertiesR0600, as ROCm 5 does.
 *
 * hipModuleGetGlobal gives a module's global as a copy of its bytes in the ELF (zero where the file has none),
 * kept with the module. MOCK_HIP_FAULT="SITE,BLOCK" makes each launch of a module with a `__tessera_fault`
 * record a failed bounds check there, as the compiler's checks would (passes/gpu_bounds_checks.py). */
#include <elf.h>
#include <stdatomic.h>

#include "../../../runtime/src/hip_driver.h"
#include "mock_common.h"

#define EXPORT __attribute__((visibility("default")))

static int env_int(const char* name, int fallback) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

#define FAIL_IF_ASKED(fn)        \
  do {                           \
    long code_ = mock_fail(fn);  \
    if (code_) {                 \
      mock_log("%s -> %ld", fn, code_); \
      return (hipError_t)code_;  \
    }                            \
  } while (0)

static const struct {
  int code;
  const char* name;
} names[] = {{0, "hipSuccess"}, {1, "hipErrorInvalidValue"}, {2, "hipErrorOutOfMemory"},
             {3, "hipErrorNotInitialized"}, {100, "hipErrorNoDevice"}, {200, "hipErrorInvalidImage"},
             {209, "hipErrorNoBinaryForGpu"}, {303, "hipErrorSharedObjectInitFailed"}, {500, "hipErrorNotFound"},
             {700, "hipErrorIllegalAddress"}, {719, "hipErrorLaunchFailure"}};

EXPORT const char* hipGetErrorName(hipError_t e) {
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (names[i].code == e) return names[i].name;
  return "hipErrorUnknown";
}

EXPORT const char* hipGetErrorString(hipError_t e) {
  (void)e;
  return "injected by the mock driver";
}

EXPORT hipError_t hipInit(unsigned flags) {
  FAIL_IF_ASKED("hipInit");
  mock_log("hipInit flags=%u", flags);
  return hipSuccess;
}

EXPORT hipError_t hipDriverGetVersion(int* v) {
  FAIL_IF_ASKED("hipDriverGetVersion");
  *v = 60342134;
  return hipSuccess;
}

EXPORT hipError_t hipGetDeviceCount(int* count) {
  FAIL_IF_ASKED("hipGetDeviceCount");
  *count = env_int("MOCK_HIP_DEVICES", 1);
  mock_log("hipGetDeviceCount -> %d", *count);
  return *count ? hipSuccess : hipErrorNoDevice;  /* as HIP does: no device is an error */
}

static _Thread_local int current_device;

EXPORT hipError_t hipGetDevice(int* device) {
  FAIL_IF_ASKED("hipGetDevice");
  *device = current_device;
  return hipSuccess;
}

EXPORT hipError_t hipSetDevice(int device) {
  FAIL_IF_ASKED("hipSetDevice");
  mock_log("hipSetDevice %d", device);
  if (device < 0 || device >= env_int("MOCK_HIP_DEVICES", 1)) return 101;
  current_device = device;
  return hipSuccess;
}

EXPORT hipError_t hipDeviceGetAttribute(int* value, int attribute, int device) {
  FAIL_IF_ASKED("hipDeviceGetAttribute");
  mock_log("hipDeviceGetAttribute attr=%d device=%d", attribute, device);
  switch (attribute) {
    case hipDeviceAttributeMaxBlockDimX:
    case hipDeviceAttributeMaxBlockDimY:
    case hipDeviceAttributeMaxBlockDimZ:
    case hipDeviceAttributeMaxThreadsPerBlock: *value = 1024; break;
    case hipDeviceAttributeMaxGridDimX: *value = 2147483647; break;
    case hipDeviceAttributeMaxGridDimY:
    case hipDeviceAttributeMaxGridDimZ: *value = 65536; break;
    case hipDeviceAttributeMultiprocessorCount: *value = 304; break;
    case hipDeviceAttributeMaxSharedMemoryPerBlock: *value = 65536; break;
    case hipDeviceAttributeWarpSize: *value = env_int("MOCK_HIP_WARP", 64); break;
    default: return 1;  /* hipErrorInvalidValue: an attribute the loader should not ask for */
  }
  return hipSuccess;
}

#ifndef MOCK_HIP_ROCM5
EXPORT hipError_t hipGetDevicePropertiesR0600(void* props, int device) {
  FAIL_IF_ASKED("hipGetDevicePropertiesR0600");
  mock_log("hipGetDevicePropertiesR0600 device=%d", device);
  /* Only the two fields the loader reads, where ROCm 6 puts them. */
  const char* arch = getenv("MOCK_HIP_ARCH");
  memset(props, 0, 1472);
  snprintf((char*)props + TSR_HIP_PROPS_NAME, 256, "Mock AMD Instinct");
  snprintf((char*)props + TSR_HIP_PROPS_GCN_ARCH_NAME, 256, "%s", arch && *arch ? arch : "gfx942:sramecc+:xnack-");
  return hipSuccess;
}
#endif

EXPORT hipError_t hipDeviceTotalMem(size_t* bytes, int device) {
  FAIL_IF_ASKED("hipDeviceTotalMem");
  (void)device;
  *bytes = (size_t)192 << 30;
  return hipSuccess;
}

/* ---- modules ---- */

enum { MOCK_GLOBALS = 8, MOCK_FUNCTIONS = 16 };

struct ihipModuleSymbol_t {
  char name[128];
  hipModule_t module;
};

struct ihipModule_t {
  const uint8_t* image;  /* the caller's: HIP's contract, the loader keeps it alive */
  struct {
    char name[64];
    void* bytes;
    size_t size;
  } globals[MOCK_GLOBALS];
  struct ihipModuleSymbol_t* functions[MOCK_FUNCTIONS];  /* as HIP, one function object per name */
};

/* The ELF image's defined dynamic symbol `name`, or NULL. */
static const Elf64_Sym* elf_symbol(const uint8_t* image, const char* name) {
  const Elf64_Ehdr* eh = (const Elf64_Ehdr*)image;
  const Elf64_Shdr* sh = (const Elf64_Shdr*)(image + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_DYNSYM) continue;
    const Elf64_Sym* syms = (const Elf64_Sym*)(image + sh[i].sh_offset);
    const char* strings = (const char*)(image + sh[sh[i].sh_link].sh_offset);
    for (size_t k = 0; k < sh[i].sh_size / sizeof *syms; k++)
      if (syms[k].st_shndx != SHN_UNDEF && strcmp(strings + syms[k].st_name, name) == 0) return &syms[k];
  }
  return NULL;
}

static int elf_has_symbol(const uint8_t* image, const char* name) { return elf_symbol(image, name) != NULL; }

EXPORT hipError_t hipModuleGetGlobal(void** address, size_t* bytes, hipModule_t module, const char* name) {
  FAIL_IF_ASKED("hipModuleGetGlobal");
  const Elf64_Sym* sym = elf_symbol(module->image, name);
  mock_log("hipModuleGetGlobal %s found=%d", name, sym != NULL);
  if (!sym || ELF64_ST_TYPE(sym->st_info) != STT_OBJECT) return 500;  /* hipErrorNotFound */
  int slot = 0;
  while (slot < MOCK_GLOBALS && module->globals[slot].bytes && strcmp(module->globals[slot].name, name)) slot++;
  if (slot == MOCK_GLOBALS) return 2;
  if (!module->globals[slot].bytes) {
    const Elf64_Ehdr* eh = (const Elf64_Ehdr*)module->image;
    const Elf64_Shdr* section = (const Elf64_Shdr*)(module->image + eh->e_shoff) + sym->st_shndx;
    uint8_t* copy = calloc(1, sym->st_size ? sym->st_size : 1);
    if (section->sh_type != SHT_NOBITS)
      memcpy(copy, module->image + section->sh_offset + (sym->st_value - section->sh_addr), sym->st_size);
    snprintf(module->globals[slot].name, sizeof module->globals[slot].name, "%s", name);
    module->globals[slot].bytes = copy;
    module->globals[slot].size = sym->st_size;
  }
  *address = module->globals[slot].bytes;
  *bytes = module->globals[slot].size;
  return hipSuccess;
}

/* A failed bounds check of a launch, where MOCK_HIP_FAULT asks for one and the module has a record. */
static void inject_fault(hipModule_t module) {
  const char* fault = getenv("MOCK_HIP_FAULT");
  unsigned site, block;
  if (!fault || sscanf(fault, "%u,%u", &site, &block) != 2) return;
  for (int i = 0; i < MOCK_GLOBALS && module->globals[i].bytes; i++)
    if (strcmp(module->globals[i].name, "__tessera_fault") == 0) {
      uint32_t* record = module->globals[i].bytes;
      if (!record[0]) {
        record[0] = site + 1;
        record[1] = block;
      }
    }
}

EXPORT hipError_t hipModuleLoadData(hipModule_t* module, const void* image) {
  FAIL_IF_ASKED("hipModuleLoadData");
  const Elf64_Ehdr* eh = image;
  int ok = memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
           eh->e_machine == EM_AMDGPU && eh->e_type == ET_DYN;
  mock_log("hipModuleLoadData elf=%s machine=%d", ok ? "amdgpu-dyn" : "bad", ok ? eh->e_machine : -1);
  if (!ok) return 200;  /* hipErrorInvalidImage */
  *module = calloc(1, sizeof **module);
  (*module)->image = image;
  return hipSuccess;
}

EXPORT hipError_t hipModuleUnload(hipModule_t module) {
  mock_log("hipModuleUnload");
  for (int i = 0; i < MOCK_GLOBALS; i++) free(module->globals[i].bytes);
  for (int i = 0; i < MOCK_FUNCTIONS; i++) free(module->functions[i]);
  free(module);
  return hipSuccess;
}

EXPORT hipError_t hipModuleGetFunction(hipFunction_t* f, hipModule_t module, const char* name) {
  FAIL_IF_ASKED("hipModuleGetFunction");
  int found = elf_has_symbol(module->image, name);
  mock_log("hipModuleGetFunction %s found=%d", name, found);
  if (!found) return 500;  /* hipErrorNotFound */
  int slot = 0;
  while (slot < MOCK_FUNCTIONS && module->functions[slot] && strcmp(module->functions[slot]->name, name)) slot++;
  if (slot == MOCK_FUNCTIONS) return 2;
  if (!module->functions[slot]) {
    module->functions[slot] = calloc(1, sizeof **f);
    snprintf(module->functions[slot]->name, sizeof module->functions[slot]->name, "%s", name);
    module->functions[slot]->module = module;
  }
  *f = module->functions[slot];
  return hipSuccess;
}

/* ---- streams and events ---- */

struct ihipStream_t {
  int id;
};
struct ihipEvent_t {
  int id, recorded_on;
};
static atomic_int next_id = 1;

EXPORT hipError_t hipStreamCreateWithFlags(hipStream_t* s, unsigned flags) {
  FAIL_IF_ASKED("hipStreamCreateWithFlags");
  *s = calloc(1, sizeof **s);
  (*s)->id = next_id++;
  mock_log("hipStreamCreateWithFlags flags=%u -> S%d", flags, (*s)->id);
  return hipSuccess;
}

EXPORT hipError_t hipStreamDestroy(hipStream_t s) {
  mock_log("hipStreamDestroy S%d", s->id);
  free(s);
  return hipSuccess;
}

EXPORT hipError_t hipEventCreateWithFlags(hipEvent_t* e, unsigned flags) {
  FAIL_IF_ASKED("hipEventCreateWithFlags");
  *e = calloc(1, sizeof **e);
  (*e)->id = next_id++;
  mock_log("hipEventCreateWithFlags flags=%u -> E%d", flags, (*e)->id);
  return hipSuccess;
}

EXPORT hipError_t hipEventRecord(hipEvent_t e, hipStream_t s) {
  FAIL_IF_ASKED("hipEventRecord");
  e->recorded_on = s ? s->id : 0;
  mock_log("hipEventRecord E%d S%d", e->id, e->recorded_on);
  return hipSuccess;
}

EXPORT hipError_t hipEventSynchronize(hipEvent_t e) {
  FAIL_IF_ASKED("hipEventSynchronize");
  mock_log("hipEventSynchronize E%d", e->id);
  return e->recorded_on ? hipSuccess : 1;  /* waiting on an event never recorded is the loader's bug */
}

EXPORT hipError_t hipEventDestroy(hipEvent_t e) {
  mock_log("hipEventDestroy E%d", e->id);
  free(e);
  return hipSuccess;
}

/* ---- memory ---- */

EXPORT hipError_t hipMalloc(void** p, size_t bytes) {
  FAIL_IF_ASKED("hipMalloc");
  *p = aligned_alloc(256, (bytes + 255) / 256 * 256);
  mock_log("hipMalloc %zu", bytes);
  return *p ? hipSuccess : 2;
}

EXPORT hipError_t hipFree(void* p) {
  mock_log("hipFree");
  free(p);
  return hipSuccess;
}

EXPORT hipError_t hipMemcpy(void* dst, const void* src, size_t bytes, int kind) {
  FAIL_IF_ASKED("hipMemcpy");
  mock_log("hipMemcpy %zu kind=%d", bytes, kind);
  memmove(dst, src, bytes);
  return hipSuccess;
}

/* ---- launches ---- */

EXPORT hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                        unsigned by, unsigned bz, unsigned smem, hipStream_t stream, void** params,
                                        void** extra) {
  FAIL_IF_ASKED("hipModuleLaunchKernel");
  mock_log("hipModuleLaunchKernel %s grid=%u,%u,%u block=%u,%u,%u smem=%u S%d extra=%s", f->name, gx, gy, gz, bx,
           by, bz, smem, stream ? stream->id : 0, extra ? "set" : "null");
  if (strcmp(f->name, "saxpy") == 0) {
    /* (a: f32, X, Y, Out: device pointers, N: i64), each params[i] pointing at the value */
    float a;
    float *x, *y, *out;
    int64_t n;
    memcpy(&a, params[0], sizeof a);
    memcpy(&x, params[1], sizeof x);
    memcpy(&y, params[2], sizeof y);
    memcpy(&out, params[3], sizeof out);
    memcpy(&n, params[4], sizeof n);
    mock_log("  saxpy a=%g n=%lld", a, (long long)n);
    /* Coarsened as passes/simt_coarsen.py compiles it (MOCK_HIP_COARSEN: its elements per thread, the image's
     * simt.coarsen): C consecutive elements a thread, below min(n, the caller's threads), a trailing argument. */
    int64_t c = env_int("MOCK_HIP_COARSEN", 1);
    if (c > 1) {
      int64_t threads;
      memcpy(&threads, params[5], sizeof threads);
      mock_log("  coarsened by %lld threads=%lld", (long long)c, (long long)threads);
      for (int64_t t = 0; t < (int64_t)gx * bx; t++)
        for (int64_t e = t * c; e < (t + 1) * c && e < n && e < threads; e++) out[e] = a * x[e] + y[e];
    } else {
      mock_saxpy(gx * gy * gz, bx * by * bz, a, x, y, out, n);
    }
  }
  inject_fault(f->module);
  return hipSuccess;
}

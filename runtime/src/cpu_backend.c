/* cpu_backend.c — the CPU backend's table (backend.h): kernels of `target: cpu` for the host's arch, run one
 * entry call per block on a pool of worker threads; device memory is host memory.
 *
 * The pool starts with the first launch, so that a context that only loads or allocates costs no threads,
 * and so that a bad TESSERA_NUM_THREADS is reported by that launch (and retried by the next). */
#define _GNU_SOURCE /* getauxval, prctl */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#endif

#include "backend.h"
#include "cpu_code.h"
#include "cpu_elf.h"
#include "cpu_fault.h"
#include "cpu_pool.h"
#include "errors.h"

typedef struct cpu_state {
  unsigned requested_threads;  /* 0: TESSERA_NUM_THREADS or online CPUs */
  pthread_mutex_t lock;        /* guards pool */
  tsr_cpu_pool_t* pool;
} cpu_state_t;

/* ---- what the host is ------------------------------------------------------------------------------- */

/* The widest vector ISA of this CPU and its register width in bytes. */
static const char* simd_isa(int* width) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return *width = 64, "avx512";
  if (__builtin_cpu_supports("avx2")) return *width = 32, "avx2";
  if (__builtin_cpu_supports("avx")) return *width = 32, "avx";
  return *width = 16, "sse2";
#elif defined(__aarch64__)
#if defined(HWCAP_SVE) && defined(PR_SVE_GET_VL)
  if (getauxval(AT_HWCAP) & HWCAP_SVE) {
    int vl = prctl(PR_SVE_GET_VL);
    if (vl > 0) return *width = vl & PR_SVE_VL_LEN_MASK, "sve";
  }
#endif
  return *width = 16, "neon";
#else
  return *width = 0, "none";
#endif
}

/* The CPU's model name from /proc/cpuinfo ("model name", or "Model" on some ARM boards). */
static void cpu_name(char* out, size_t size) {
  snprintf(out, size, "%s CPU", tsr_cpu_host_arch() ? tsr_cpu_host_arch() : "unknown");
  FILE* f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) != 0 && strncmp(line, "Model", 5) != 0) continue;
    char* value = strchr(line, ':');
    if (!value) continue;
    value += 1 + strspn(value + 1, " \t");
    value[strcspn(value, "\n")] = 0;
    if (*value) snprintf(out, size, "%s", value);
    break;
  }
  fclose(f);
}

static uint64_t total_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

/* ---- the table -------------------------------------------------------------------------------------- */

static const char* unavailable(void) {
  return tsr_cpu_host_arch() ? NULL : "the CPU backend does not support this host architecture";
}

static bool runs_arch(const char* arch) {
  const char* host = tsr_cpu_host_arch();
  return host && strcmp(arch, host) == 0;
}

static tsr_status_t create(const tsr_context_options_t* options, void** out_state) {
  if (options->flags & TSR_CONTEXT_DEBUG) {
    tsr_status_t st = tsr_cpu_fault_install();
    if (st) return st;
  }
  cpu_state_t* s = calloc(1, sizeof *s);
  if (!s) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory creating a context");
  s->requested_threads = options->worker_threads;
  pthread_mutex_init(&s->lock, NULL);
  *out_state = s;
  return TSR_SUCCESS;
}

static void destroy(void* state) {
  cpu_state_t* s = state;
  tsr_cpu_pool_destroy(s->pool);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

static tsr_status_t pool_of(cpu_state_t* s, tsr_cpu_pool_t** out) {
  tsr_status_t st = TSR_SUCCESS;
  pthread_mutex_lock(&s->lock);
  if (!s->pool) {
    unsigned n;
    if (!(st = tsr_cpu_thread_count(s->requested_threads, &n))) st = tsr_cpu_pool_create(n, &s->pool);
  }
  *out = s->pool;
  pthread_mutex_unlock(&s->lock);
  return st;
}

/* Workers of the started pool, or the number a pool would get. */
static tsr_status_t compute_units(cpu_state_t* s, unsigned* out) {
  pthread_mutex_lock(&s->lock);
  tsr_status_t st = TSR_SUCCESS;
  if (s->pool) *out = tsr_cpu_pool_threads(s->pool);
  else st = tsr_cpu_thread_count(s->requested_threads, out);
  pthread_mutex_unlock(&s->lock);
  return st;
}

static tsr_status_t limit(void* state, tsr_limit_t which, int64_t* out) {
  int width;
  unsigned units;
  tsr_status_t st;
  switch (which) {
    case TSR_LIMIT_MAX_THREADS_PER_BLOCK: *out = TSR_CPU_MAX_BLOCK_THREADS; return TSR_SUCCESS;
    case TSR_LIMIT_MAX_SHARED_BYTES_PER_BLOCK: *out = TSR_CPU_MAX_SMEM_BYTES; return TSR_SUCCESS;
    case TSR_LIMIT_WARP_SIZE: *out = 32; return TSR_SUCCESS;
    case TSR_LIMIT_MAX_BLOCK_DIM_X:
    case TSR_LIMIT_MAX_BLOCK_DIM_Y:
    case TSR_LIMIT_MAX_BLOCK_DIM_Z: *out = TSR_CPU_MAX_BLOCK_THREADS; return TSR_SUCCESS;
    case TSR_LIMIT_MAX_GRID_DIM_X:
    case TSR_LIMIT_MAX_GRID_DIM_Y:
    case TSR_LIMIT_MAX_GRID_DIM_Z: *out = UINT32_MAX; return TSR_SUCCESS;
    case TSR_LIMIT_COMPUTE_UNITS:
      if ((st = compute_units(state, &units))) return st;
      *out = units;
      return TSR_SUCCESS;
    case TSR_LIMIT_SIMD_WIDTH_BYTES: simd_isa(&width); *out = width; return TSR_SUCCESS;
    case TSR_LIMIT_ALLOC_ALIGNMENT: *out = TSR_ALLOC_ALIGNMENT; return TSR_SUCCESS;
    case TSR_LIMIT_TOTAL_MEMORY_BYTES: *out = (int64_t)total_memory(); return TSR_SUCCESS;
  }
  return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrGetLimit: unknown limit %d", (int)which);
}

static tsr_status_t properties(void* state, tsr_device_properties_t* p) {
  unsigned units;
  tsr_status_t st = compute_units(state, &units);
  if (st) return st;
  int width;
  *p = (tsr_device_properties_t){.warp_size = 32, .max_threads_per_block = TSR_CPU_MAX_BLOCK_THREADS,
                                 .max_shared_bytes_per_block = TSR_CPU_MAX_SMEM_BYTES, .compute_units = units,
                                 .total_memory_bytes = total_memory()};
  snprintf(p->backend, sizeof p->backend, "cpu");
  cpu_name(p->name, sizeof p->name);
  snprintf(p->arch, sizeof p->arch, "%s", tsr_cpu_host_arch());
  snprintf(p->simd_isa, sizeof p->simd_isa, "%s", simd_isa(&width));
  return TSR_SUCCESS;
}

static tsr_status_t code_load(void* state, const uint8_t* bytes, size_t size, const char* section, void** out) {
  (void)state;
  return tsr_cpu_code_load(bytes, size, section, (tsr_cpu_code_t**)out);
}

static bool code_entry(void* code, const char* symbol, const void** out) {
  tsr_cpu_entry_t entry;
  if (!tsr_cpu_code_entry(code, symbol, &entry)) return false;
  memcpy(out, &entry, sizeof entry);  /* a function pointer travels as the table's opaque pointer */
  return true;
}

static void code_unload(void* code) { tsr_cpu_code_unload(code); }

static tsr_status_t mem_alloc(void* state, size_t bytes, void** out) {
  (void)state;
  *out = aligned_alloc(TSR_ALLOC_ALIGNMENT, bytes);  /* pool blocks are multiples of the alignment */
  return *out ? TSR_SUCCESS : tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrAlloc: cannot allocate %zu bytes", bytes);
}

static void mem_free(void* state, void* ptr) {
  (void)state;
  free(ptr);
}

static tsr_status_t copy(void* state, void* dst, const void* src, size_t bytes, tsr_memcpy_kind_t kind) {
  (void)state, (void)kind;
  memmove(dst, src, bytes);
  return TSR_SUCCESS;
}

/* ---- launches --------------------------------------------------------------------------------------- */

typedef struct grid_job {
  tsr_cpu_entry_t entry;
  void** args;
  uint32_t grid[3], block[3];
  bool guarded;
  tsr_cpu_job_t job;
  atomic_flag faulted;
  tsr_fault_t fault;  /* the first fault, written by the block that set `faulted` */
} grid_job_t;

/* Block i of the grid, x fastest. */
static void run_block(void* arg, uint64_t i) {
  grid_job_t* g = arg;
  const char* report = NULL;
  tsr_cpu_block_ctx_t ctx = {
      .grid = {g->grid[0], g->grid[1], g->grid[2]},
      .block = {g->block[0], g->block[1], g->block[2]},
      .block_id = {(uint32_t)(i % g->grid[0]), (uint32_t)(i / g->grid[0] % g->grid[1]),
                   (uint32_t)(i / g->grid[0] / g->grid[1])},
      .reserved = 0,
      .fault = &report};
  uintptr_t address = 0;
  int signal = 0;
  if (!g->guarded) g->entry(g->args, &ctx);
  else if (!tsr_cpu_run_guarded(g->entry, g->args, &ctx, &address, &signal)) report = NULL;  /* the signal's */
  if (!report && !signal) return;
  if (!atomic_flag_test_and_set(&g->faulted))
    g->fault = (tsr_fault_t){address, {ctx.block_id[0], ctx.block_id[1], ctx.block_id[2]}, signal, report};
  tsr_cpu_job_cancel(&g->job);
}

static tsr_status_t launch(void* state, const tsr_backend_launch_t* l, tsr_fault_t* fault) {
  tsr_cpu_pool_t* pool;
  tsr_status_t st = pool_of(state, &pool);
  if (st) return st;
  grid_job_t g = {.args = l->args, .grid = {l->grid[0], l->grid[1], l->grid[2]},
                  .block = {l->block[0], l->block[1], l->block[2]}, .guarded = l->guarded,
                  .faulted = ATOMIC_FLAG_INIT};
  memcpy(&g.entry, &l->entry, sizeof g.entry);
  g.job = (tsr_cpu_job_t){.task = run_block, .arg = &g, .priority = l->priority, .affinity = l->affinity,
                          .count = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2]};  /* < 2^64: checked */
  tsr_cpu_pool_run(pool, &g.job, tsr_cpu_thread_can_run_blocks());
  if (atomic_flag_test_and_set(&g.faulted)) {
    *fault = g.fault;
    return TSR_ERROR_MEMORY_FAULT;
  }
  return TSR_SUCCESS;
}

const tsr_backend_t tsr_cpu_backend = {
    .name = "cpu",
    .target = "cpu",
    .unavailable = unavailable,
    .runs_arch = runs_arch,
    .create = create,
    .destroy = destroy,
    .properties = properties,
    .limit = limit,
    .code_load = code_load,
    .code_entry = code_entry,
    .code_unload = code_unload,
    .host_memory = true,
    .mem_alloc = mem_alloc,
    .mem_free = mem_free,
    .copy = copy,
    .launch = launch,
};

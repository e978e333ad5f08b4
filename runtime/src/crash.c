/* crash.c — crash capture (crash.h).
 *
 * A failing launch may carry garbage: argument slots that point nowhere, tensor pointers into unmapped
 * memory. Everything the caller gave is therefore read through safe_read(), which copies through a pipe:
 * the kernel reports EFAULT for an unreadable source instead of the process faulting. */
#define _GNU_SOURCE /* pipe2 */
#include "crash.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "errors.h"
#include "image.h"
#include "json.h"
#include "objects.h"

enum { MAX_REGIONS = 64 };
#define DEFAULT_MAX_BYTES ((uint64_t)256 << 20)

/* One memory range a tensor argument points into. */
typedef struct region {
  uintptr_t base;
  uint64_t bytes;
  uint32_t kind;       /* tsr_memory_kind_t; TSR_MEMORY_UNKNOWN: plain host memory */
  uint64_t alloc_bytes;  /* the allocation's size when the context knows it */
  unsigned char* data; /* NULL when not captured */
  const char* missing; /* why not */
} region_t;

struct tsr_crash_snapshot {
  region_t regions[MAX_REGIONS];
  size_t count;
};

char* tsr_crash_dir_from_env(void) {
  const char* dir = getenv("TESSERA_CRASH_DIR");
  return dir && *dir ? strdup(dir) : NULL;
}

/* Copies n bytes from a possibly unreadable address; false (dst partly written) when it is not readable. */
static bool safe_read(void* dst, const void* src, size_t n) {
  int fds[2];
  if (!src || pipe2(fds, O_CLOEXEC) != 0) return false;
  bool ok = true;
  for (size_t done = 0; ok && done < n;) {
    size_t chunk = n - done < 65536 ? n - done : 65536;
    ssize_t w = write(fds[1], (const char*)src + done, chunk);
    if (w <= 0) {
      ok = false;
      break;
    }
    for (ssize_t got = 0; got < w;) {
      ssize_t r = read(fds[0], (char*)dst + done + got, (size_t)(w - got));
      if (r <= 0) {
        ok = false;
        break;
      }
      got += r;
    }
    done += (size_t)w;
  }
  close(fds[0]);
  close(fds[1]);
  return ok;
}

/* The value slot of argument i, copied into `out` (`size` bytes); false when the slot is missing. */
static bool slot(const tsr_launch_record_t* r, size_t i, void* out, size_t size) {
  if (!r->args || i >= r->nargs) return false;
  void* p;
  return safe_read(&p, &r->args[i], sizeof p) && p && safe_read(out, p, size);
}

/* A tensor's bytes from its extents, read defensively; false when an extent is unknown or absurd. */
static bool tensor_bytes(const tsr_launch_record_t* r, size_t index, uint64_t* out) {
  const tsr_arg_info_t* a = &r->kernel->args[index];
  uint64_t bytes = tsr_dtype_size(a->dtype);
  for (uint32_t d = 0; d < a->rank; d++) {
    int64_t extent = a->dims[d];
    if (extent < 0 && !slot(r, (size_t)(-(extent + 1)), &extent, sizeof extent)) return false;
    if (extent < 0 || __builtin_mul_overflow(bytes, (uint64_t)extent, &bytes)) return false;
  }
  *out = bytes;
  return true;
}

static uint64_t max_bytes(void) {
  const char* env = getenv("TESSERA_CRASH_MAX_BYTES");
  if (!env || !*env) return DEFAULT_MAX_BYTES;
  char* end;
  unsigned long long v = strtoull(env, &end, 10);
  return *end ? DEFAULT_MAX_BYTES : v;
}

/* The region holding a tensor argument, added to the snapshot when new; its index, or -1. */
static int region_of(const tsr_launch_record_t* r, size_t index, tsr_crash_snapshot_t* s, uint64_t* budget) {
  void* buffer;
  if (!slot(r, index, &buffer, sizeof buffer) || !buffer) return -1;
  struct tsr_context* ctx = r->kernel->module->obj.context;
  tsr_allocation_t a;
  region_t reg = {0};
  if (tsr_memory_lookup(ctx, buffer, &a)) {
    reg = (region_t){.base = a.base, .bytes = a.bytes, .kind = a.kind, .alloc_bytes = a.bytes};
  } else {
    uint64_t bytes;
    reg = (region_t){.base = (uintptr_t)buffer, .kind = TSR_MEMORY_UNKNOWN};
    if (tensor_bytes(r, index, &bytes)) reg.bytes = bytes;
    else reg.missing = "its extents are unknown";
  }
  for (size_t i = 0; i < s->count; i++)
    if (s->regions[i].base == reg.base && s->regions[i].bytes == reg.bytes) return (int)i;
  if (s->count == MAX_REGIONS) return -1;
  if (!reg.missing && reg.bytes > *budget) reg.missing = "over TESSERA_CRASH_MAX_BYTES";
  if (!reg.missing) {
    reg.data = malloc(reg.bytes ? reg.bytes : 1);
    if (!reg.data) reg.missing = "out of memory";
    else if (!safe_read(reg.data, (const void*)reg.base, reg.bytes)) {
      free(reg.data);
      reg.data = NULL;
      reg.missing = "the memory is not readable";
    } else {
      *budget -= reg.bytes;
    }
  }
  s->regions[s->count] = reg;
  return (int)s->count++;
}

tsr_crash_snapshot_t* tsr_crash_snapshot(const tsr_launch_record_t* r) {
  tsr_crash_snapshot_t* s = calloc(1, sizeof *s);
  if (!s) return NULL;
  uint64_t budget = max_bytes();
  for (size_t i = 0; i < r->kernel->arg_count; i++)
    if (r->kernel->args[i].kind == TSR_ARG_TENSOR) region_of(r, i, s, &budget);
  return s;
}

void tsr_crash_snapshot_free(tsr_crash_snapshot_t* s) {
  if (!s) return;
  for (size_t i = 0; i < s->count; i++) free(s->regions[i].data);
  free(s);
}

/* ---- writing ---------------------------------------------------------------------------------------- */

static FILE* open_in(const char* dir, const char* name, const char* mode) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) return NULL;
  return fopen(path, mode);
}

static void write_file(const char* dir, const char* name, const void* data, size_t size) {
  FILE* f = open_in(dir, name, "wb");
  if (!f) return;
  fwrite(data, 1, size, f);
  fclose(f);
}

static const char* kind_name(uint32_t kind) {
  return kind == TSR_ARG_SCALAR ? "scalar" : kind == TSR_ARG_TENSOR ? "tensor" : "dim";
}

static void write_kernel_json(const char* dir, const struct tsr_kernel* k) {
  FILE* f = open_in(dir, "kernel.json", "w");
  if (!f) return;
  fputs("{\n  \"name\": ", f);
  tsr_json_string(f, k->name);
  fputs(",\n  \"entry\": ", f);
  tsr_json_string(f, k->entry_symbol);
  fputs(",\n  \"target\": ", f);
  tsr_json_string(f, k->target);
  fputs(",\n  \"arch\": ", f);
  tsr_json_string(f, k->arch);
  fputs(",\n  \"section\": ", f);
  tsr_json_string(f, k->section);
  fprintf(f, ",\n  \"block\": [%u, %u, %u],\n  \"warp_size\": %u,\n  \"smem_bytes\": %u,\n  \"regs\": %u,\n"
          "  \"flags\": %u,\n  \"args\": [", k->block[0], k->block[1], k->block[2], k->warp_size, k->smem_bytes,
          k->regs, k->flags);
  for (size_t i = 0; i < k->arg_count; i++) {
    const tsr_arg_info_t* a = &k->args[i];
    fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
    tsr_json_string(f, a->name);
    fprintf(f, ", \"kind\": \"%s\", \"dtype\": %u, \"rank\": %u, \"flags\": %u, \"dims\": [", kind_name(a->kind),
            a->dtype, a->rank, a->flags);
    for (uint32_t d = 0; d < a->rank; d++) fprintf(f, "%s%" PRId64, d ? ", " : "", a->dims[d]);
    fputs("]}", f);
  }
  fputs("\n  ],\n  \"properties\": {", f);
  for (size_t i = 0; i < k->prop_count; i++) {
    fputs(i ? ", " : "", f);
    tsr_json_string(f, k->props[i].key);
    fputs(": ", f);
    tsr_json_string(f, k->props[i].value);
  }
  fputs("}\n}\n", f);
  fclose(f);
}

static void hex(FILE* f, const unsigned char* p, size_t n) {
  fputc('"', f);
  for (size_t i = 0; i < n; i++) fprintf(f, "%02x", p[i]);
  fputc('"', f);
}

static const char* memory_name(uint32_t kind) {
  static const char* const names[] = {"host", "device", "pinned", "registered", "device registered"};
  return kind < sizeof names / sizeof *names ? names[kind] : "host";
}

static void write_launch_json(const char* dir, const tsr_launch_record_t* r, tsr_crash_snapshot_t* s,
                              tsr_status_t status, const char* message) {
  FILE* f = open_in(dir, "launch.json", "w");
  if (!f) return;
  const struct tsr_kernel* k = r->kernel;
  struct tsr_context* ctx = k->module->obj.context;
  fputs("{\n  \"kernel\": ", f);
  tsr_json_string(f, k->name);
  fprintf(f, ",\n  \"status\": \"%s\",\n  \"status_code\": %d,\n  \"message\": ", tsrGetStatusName(status),
          (int)status);
  tsr_json_string(f, message);
  fprintf(f, ",\n  \"backend\": \"%s\",\n  \"debug\": %s,\n  \"grid\": [%u, %u, %u],\n  \"block\": [%u, %u, %u],\n"
          "  \"smem_bytes\": %u,\n  \"stream\": %" PRIu64 ",\n  \"priority\": %d,\n  \"affinity\": %" PRIu64 ",\n"
          "  \"phase\": %u,\n  \"nargs\": %zu,\n  \"args\": [", ctx->backend->name, ctx->debug ? "true" : "false",
          r->grid[0], r->grid[1], r->grid[2], r->block[0], r->block[1], r->block[2], r->smem_bytes, r->stream,
          r->priority, r->affinity, r->phase, r->nargs);
  uint64_t budget = max_bytes();
  for (size_t i = 0; i < k->arg_count; i++) {
    const tsr_arg_info_t* a = &k->args[i];
    fprintf(f, "%s\n    {\"index\": %zu, \"name\": ", i ? "," : "", i);
    tsr_json_string(f, a->name);
    fprintf(f, ", \"kind\": \"%s\", \"dtype\": %u", kind_name(a->kind), a->dtype);
    unsigned char value[8];
    size_t size = tsr_arg_value_size(a);
    if (size > sizeof value || !slot(r, i, value, size)) {
      fputs(", \"missing\": true}", f);
      continue;
    }
    fputs(", \"value_hex\": ", f);
    hex(f, value, size);
    if (a->kind == TSR_ARG_TENSOR) {
      uintptr_t address;
      memcpy(&address, value, sizeof address);
      int reg = region_of(r, i, s, &budget);  /* finds the snapshot's region, or reads it now */
      fprintf(f, ", \"address\": \"0x%" PRIxPTR "\"", address);
      if (reg >= 0) fprintf(f, ", \"region\": %d, \"offset\": %" PRIuPTR, reg, address - s->regions[reg].base);
    } else if (a->kind == TSR_ARG_DIMENSION) {
      int64_t extent;
      memcpy(&extent, value, sizeof extent);
      fprintf(f, ", \"value\": %" PRId64, extent);
    }
    fputc('}', f);
  }
  fputs("\n  ],\n  \"regions\": [", f);
  for (size_t i = 0; i < s->count; i++) {
    const region_t* g = &s->regions[i];
    char name[32];
    snprintf(name, sizeof name, "region%zu.bin", i);
    if (g->data) write_file(dir, name, g->data, g->bytes);
    fprintf(f, "%s\n    {\"id\": %zu, \"address\": \"0x%" PRIxPTR "\", \"bytes\": %" PRIu64 ", \"memory\": \"%s\", "
            "\"file\": ", i ? "," : "", i, g->base, g->bytes, memory_name(g->kind));
    tsr_json_string(f, g->data ? name : NULL);
    if (g->missing) {
      fputs(", \"missing\": ", f);
      tsr_json_string(f, g->missing);
    }
    fputc('}', f);
  }
  fputs("\n  ]\n}\n", f);
  fclose(f);
}

static void write_log(const char* dir, const tsr_launch_record_t* r, tsr_status_t status, const char* message) {
  FILE* f = open_in(dir, "log.txt", "w");
  if (!f) return;
  fprintf(f, "libtessera %d.%d.%d, image ABI %d.%d, pid %ld\n", TSR_VERSION_MAJOR, TSR_VERSION_MINOR,
          TSR_VERSION_PATCH, TSR_ABI_MAJOR, TSR_ABI_MINOR, (long)getpid());
  fprintf(f, "launch of kernel '%s' failed: %s: %s\n\nrecent failures, oldest first:\n", r->kernel->name,
          tsrGetStatusName(status), message);
  tsr_log_write(f);
  fclose(f);
}

/* A fresh directory under `root` named for the kernel, the process and a counter. */
static bool make_dir(const char* root, const char* kernel, char* out, size_t size) {
  static atomic_uint counter;
  mkdir(root, 0777);  /* the parent must exist; an existing root is fine */
  char name[64];
  size_t n = 0;
  for (const char* p = kernel; *p && n < sizeof name - 1; p++)
    name[n++] = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
                        *p == '-' || *p == '.'
                    ? *p
                    : '_';
  name[n] = 0;
  for (int attempt = 0; attempt < 1000; attempt++) {
    if (snprintf(out, size, "%s/%s-%ld-%u", root, name, (long)getpid(), atomic_fetch_add(&counter, 1)) >= (int)size)
      return false;
    if (mkdir(out, 0777) == 0) return true;
    if (errno != EEXIST) return false;
  }
  return false;
}

void tsr_crash_write(const tsr_launch_record_t* r, tsr_crash_snapshot_t* snapshot, tsr_status_t status,
                     const char* message) {
  char dir[4096];
  char saved[1024];  /* `message` is usually the thread's last error, which must survive what follows */
  snprintf(saved, sizeof saved, "%s", message);
  const char* root = r->kernel->module->obj.context->crash_dir;
  if (!make_dir(root, r->kernel->name, dir, sizeof dir)) {
    fprintf(stderr, "tessera: crash capture: cannot create a directory under TESSERA_CRASH_DIR=%s: %s\n", root,
            strerror(errno));
    return;
  }
  tsr_crash_snapshot_t* fresh = snapshot ? NULL : calloc(1, sizeof *fresh);
  tsr_crash_snapshot_t* s = snapshot ? snapshot : fresh;
  if (!s) return;
  const struct tsr_module* m = r->kernel->module;
  write_file(dir, "image.tessera", m->image, m->image_size);
  tsr_image_t img;
  if (tsr_image_parse(m->image, m->image_size, &img) == TSR_SUCCESS) {
    for (uint16_t i = 0; i < img.section_count; i++)
      if (strcmp(img.sections[i].name, ".tessera.ops") == 0)
        write_file(dir, "ops.mlirbc", img.sections[i].data, img.sections[i].size);
    tsr_image_release(&img);
  }
  write_kernel_json(dir, r->kernel);
  write_launch_json(dir, r, s, status, saved);
  write_log(dir, r, status, saved);
  tsr_crash_snapshot_free(fresh);
  fprintf(stderr, "tessera: launch of '%s' failed (%s); crash capture in %s\n", r->kernel->name,
          tsrGetStatusName(status), dir);
}

/* module.c — building a module from a validated image (copying what outlives the caller's buffer, loading
 * CPU code), kernel lookup and introspection, and module teardown. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "handles.h"
#include "image.h"
#include "objects.h"

static bool runs_here(const tsr_image_t* img, const tsr_image_kernel_t* k) {
  const char* arch = tsr_cpu_host_arch();
  return arch && strcmp(tsr_image_str(img, k->target), "cpu") == 0 && strcmp(tsr_image_str(img, k->arch), arch) == 0;
}

static int by_kernel_name(const void* a, const void* b) {
  return strcmp((*(struct tsr_kernel* const*)a)->name, (*(struct tsr_kernel* const*)b)->name);
}

static tsr_status_t check_unique_names(struct tsr_module* m) {
  if (m->kernel_count < 2) return TSR_SUCCESS;
  struct tsr_kernel** sorted = malloc(m->kernel_count * sizeof *sorted);
  if (!sorted) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory loading a module");
  for (size_t i = 0; i < m->kernel_count; i++) sorted[i] = &m->kernels[i];
  qsort(sorted, m->kernel_count, sizeof *sorted, by_kernel_name);
  tsr_status_t st = TSR_SUCCESS;
  for (size_t i = 1; i < m->kernel_count && !st; i++)
    if (strcmp(sorted[i]->name, sorted[i - 1]->name) == 0)
      st = tsr_fail(TSR_ERROR_BAD_IMAGE, "bad image: two kernels named '%s' for %s", sorted[i]->name,
                    tsr_cpu_host_arch());
  free(sorted);
  return st;
}

/* The loaded object of a code section, loading it on first use. `loaded_from` holds the strtab offsets of
 * the section names already loaded, parallel to m->code. */
static tsr_status_t code_for(struct tsr_module* m, const tsr_image_t* img, uint32_t section, uint32_t* loaded_from,
                             tsr_cpu_code_t** out) {
  for (size_t i = 0; i < m->code_count; i++)
    if (strcmp(tsr_image_str(img, loaded_from[i]), tsr_image_str(img, section)) == 0) {
      *out = m->code[i];
      return TSR_SUCCESS;
    }
  const tsr_image_section_t* s = tsr_image_find_section(img, tsr_image_str(img, section));
  if (!s) return TSR_ERROR_BAD_IMAGE;  /* unreachable: the parser resolved every kernel's section */
  tsr_status_t st = tsr_cpu_code_load(s->data, s->size, s->name, &m->code[m->code_count]);
  if (st) return st;
  loaded_from[m->code_count] = section;
  *out = m->code[m->code_count++];
  return TSR_SUCCESS;
}

static tsr_status_t build(struct tsr_module* m, const tsr_image_t* img) {
  size_t runnable = 0, arg_total = 0;
  for (uint32_t k = 0; k < img->kernel_count; k++)
    if (runs_here(img, &img->kernels[k])) {
      runnable++;
      arg_total += img->kernels[k].arg_count;
    }
  size_t foreign = img->kernel_count - runnable;
  m->strtab = malloc(img->strtab_size);
  m->dims = malloc((img->dim_count + (size_t)1) * sizeof *m->dims);
  m->args = calloc(arg_total + 1, sizeof *m->args);
  m->kernels = calloc(runnable + 1, sizeof *m->kernels);
  m->foreign = calloc(foreign + 1, sizeof *m->foreign);
  m->code = calloc(runnable + 1, sizeof *m->code);
  uint32_t* loaded_from = calloc(runnable + 1, sizeof *loaded_from);
  if (!m->strtab || !m->dims || !m->args || !m->kernels || !m->foreign || !m->code || !loaded_from) {
    free(loaded_from);
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory loading a module");
  }
  memcpy(m->strtab, img->strtab, img->strtab_size);
  memcpy(m->dims, img->dims, img->dim_count * sizeof *m->dims);

  tsr_status_t st = TSR_SUCCESS;
  tsr_arg_info_t* next_arg = m->args;
  for (uint32_t k = 0; k < img->kernel_count && !st; k++) {
    const tsr_image_kernel_t* ik = &img->kernels[k];
    if (!runs_here(img, ik)) {
      m->foreign[m->foreign_count++] = (tsr_foreign_kernel_t){
          m->strtab + ik->name, m->strtab + ik->target, m->strtab + ik->arch};
      continue;
    }
    struct tsr_kernel* kernel = &m->kernels[m->kernel_count++];
    *kernel = (struct tsr_kernel){
        .magic = TSR_MAGIC_KERNEL, .module = m, .name = m->strtab + ik->name,
        .block = {ik->block[0], ik->block[1], ik->block[2]}, .warp_size = ik->warp_size, .smem_bytes = ik->smem_bytes,
        .regs = ik->regs, .flags = ik->flags,
        .arg_count = ik->arg_count, .args = next_arg};
    for (uint32_t i = 0; i < ik->arg_count; i++) {
      const tsr_image_arg_t* a = &img->args[ik->arg_first + i];
      *next_arg++ = (tsr_arg_info_t){m->strtab + a->name, a->kind, a->dtype, a->rank, a->flags,
                                     a->rank ? m->dims + a->dims_first : NULL};
    }
    tsr_cpu_code_t* code;
    st = code_for(m, img, ik->section, loaded_from, &code);
    if (!st && !tsr_cpu_code_entry(code, tsr_image_str(img, ik->entry), &kernel->entry))
      st = tsr_fail(TSR_ERROR_BAD_IMAGE, "bad image: kernel '%s': entry symbol '%s' is not exported by section '%s'",
                    kernel->name, tsr_image_str(img, ik->entry), tsr_image_str(img, ik->section));
  }
  free(loaded_from);
  return st ? st : check_unique_names(m);
}

/* Frees the module and what build() made. It must no longer be registered (or never have been). */
static void destroy(struct tsr_module* m) {
  for (size_t i = 0; i < m->code_count; i++) tsr_cpu_code_unload(m->code[i]);
  free(m->code);
  free(m->foreign);
  free(m->kernels);
  free(m->args);
  free(m->dims);
  free(m->strtab);
  pthread_cond_destroy(&m->idle);
  pthread_mutex_destroy(&m->busy_lock);
  free(m);
}

static tsr_status_t publish(struct tsr_context* ctx, struct tsr_module* m) {
  tsr_status_t st = TSR_SUCCESS;
  tsr_handles_lock();
  if (!tsr_handle_is_live_locked(ctx, TSR_MAGIC_CONTEXT)) {
    tsr_handles_unlock();
    return tsr_fail(TSR_ERROR_INVALID_HANDLE, "tsrLoadModule: the context was destroyed during the load");
  }
  size_t added = 0;
  st = tsr_handle_add_locked(m);
  while (!st && added < m->kernel_count) st = tsr_handle_add_locked(&m->kernels[added++]);
  if (st) {
    tsr_handle_remove_locked(m);
    for (size_t i = 0; i < added; i++) tsr_handle_remove_locked(&m->kernels[i]);
  } else {
    pthread_mutex_lock(&ctx->lock);
    m->next = ctx->modules;
    ctx->modules = m;
    pthread_mutex_unlock(&ctx->lock);
  }
  tsr_handles_unlock();
  return st;
}

tsr_status_t tsrLoadModule(tsr_context_t ctx, const void* image, size_t image_size, tsr_module_t* out_module) {
  if (!tsr_handle_is_live(ctx, TSR_MAGIC_CONTEXT))
    return tsr_fail_handle(__func__, "context");
  if (!out_module) return tsr_fail_null_output(__func__);
  tsr_image_t img;
  tsr_status_t st = tsr_image_parse(image, image_size, &img);
  if (st) return st;
  struct tsr_module* m = calloc(1, sizeof *m);
  if (!m) {
    tsr_image_release(&img);
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory loading a module");
  }
  m->magic = TSR_MAGIC_MODULE;
  m->context = ctx;
  pthread_mutex_init(&m->busy_lock, NULL);
  pthread_cond_init(&m->idle, NULL);
  st = build(m, &img);
  tsr_image_release(&img);
  if (!st) st = publish(ctx, m);
  if (st) {
    destroy(m);
    return st;
  }
  *out_module = m;
  return TSR_SUCCESS;
}

void tsr_module_retire_locked(struct tsr_module* m) {
  tsr_handle_remove_locked(m);
  m->magic = 0;
  for (size_t i = 0; i < m->kernel_count; i++) {
    tsr_handle_remove_locked(&m->kernels[i]);
    m->kernels[i].magic = 0;
  }
}

void tsr_module_free(struct tsr_module* m) {
  pthread_mutex_lock(&m->busy_lock);
  while (m->busy) pthread_cond_wait(&m->idle, &m->busy_lock);
  pthread_mutex_unlock(&m->busy_lock);
  destroy(m);
}

tsr_status_t tsrUnloadModule(tsr_module_t m) {
  tsr_handles_lock();
  if (!tsr_handle_is_live_locked(m, TSR_MAGIC_MODULE)) {
    tsr_handles_unlock();
    return tsr_fail_handle(__func__, "module");
  }
  tsr_module_retire_locked(m);
  struct tsr_context* ctx = m->context;
  pthread_mutex_lock(&ctx->lock);
  for (struct tsr_module** link = &ctx->modules; *link; link = &(*link)->next)
    if (*link == m) {
      *link = m->next;
      break;
    }
  pthread_mutex_unlock(&ctx->lock);
  tsr_handles_unlock();
  tsr_module_free(m);
  return TSR_SUCCESS;
}

tsr_status_t tsr_kernel_acquire(tsr_kernel_t kernel) {
  tsr_handles_lock();
  bool live = tsr_handle_is_live_locked(kernel, TSR_MAGIC_KERNEL);
  if (live) {
    pthread_mutex_lock(&kernel->module->busy_lock);
    kernel->module->busy++;
    pthread_mutex_unlock(&kernel->module->busy_lock);
  }
  tsr_handles_unlock();
  return live ? TSR_SUCCESS : tsr_fail_handle("tsrLaunch", "kernel");
}

void tsr_kernel_release(tsr_kernel_t kernel) {
  struct tsr_module* m = kernel->module;
  pthread_mutex_lock(&m->busy_lock);
  if (--m->busy == 0) pthread_cond_broadcast(&m->idle);
  pthread_mutex_unlock(&m->busy_lock);
}

/* ---- lookup and introspection ------------------------------------------------------------------------ */

/* Appends to a message buffer, truncating quietly when it is full. */
static void append(char* buf, size_t size, size_t* len, const char* format, ...) {
  if (*len >= size) return;
  va_list ap;
  va_start(ap, format);
  int n = vsnprintf(buf + *len, size - *len, format, ap);
  va_end(ap);
  if (n > 0) *len += (size_t)n;
}

static tsr_status_t not_found(const struct tsr_module* m, const char* name) {
  char msg[768];
  size_t len = 0;
  bool elsewhere = false;
  for (size_t i = 0; i < m->foreign_count; i++) {
    if (strcmp(m->foreign[i].name, name) != 0) continue;
    append(msg, sizeof msg, &len, "%s%s/%s", elsewhere ? ", " : "", m->foreign[i].target, m->foreign[i].arch);
    elsewhere = true;
  }
  const char* arch = tsr_cpu_host_arch();
  if (elsewhere)
    return tsr_fail(TSR_ERROR_NOT_FOUND, "kernel '%s' has no code this runtime can run (cpu/%s); the image has it "
                    "for %s", name, arch ? arch : "unsupported host", msg);
  len = 0;
  msg[0] = 0;
  for (size_t i = 0; i < m->kernel_count; i++)
    append(msg, sizeof msg, &len, "%s'%s'", i ? ", " : "", m->kernels[i].name);
  return tsr_fail(TSR_ERROR_NOT_FOUND, "no kernel named '%s' in the module (runnable kernels: %s)", name,
                  m->kernel_count ? msg : "none");
}

tsr_status_t tsrGetKernel(tsr_module_t m, const char* name, tsr_kernel_t* out_kernel) {
  if (!tsr_handle_is_live(m, TSR_MAGIC_MODULE)) return tsr_fail_handle(__func__, "module");
  if (!out_kernel) return tsr_fail_null_output(__func__);
  if (!name) return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrGetKernel: the kernel name is NULL");
  for (size_t i = 0; i < m->kernel_count; i++)
    if (strcmp(m->kernels[i].name, name) == 0) {
      *out_kernel = &m->kernels[i];
      return TSR_SUCCESS;
    }
  return not_found(m, name);
}

tsr_status_t tsrModuleGetKernelCount(tsr_module_t m, size_t* out_count) {
  if (!tsr_handle_is_live(m, TSR_MAGIC_MODULE)) return tsr_fail_handle(__func__, "module");
  if (!out_count) return tsr_fail_null_output(__func__);
  *out_count = m->kernel_count;
  return TSR_SUCCESS;
}

tsr_status_t tsrModuleGetKernelName(tsr_module_t m, size_t index, const char** out_name) {
  if (!tsr_handle_is_live(m, TSR_MAGIC_MODULE)) return tsr_fail_handle(__func__, "module");
  if (!out_name) return tsr_fail_null_output(__func__);
  if (index >= m->kernel_count)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrModuleGetKernelName: index %zu, but the module has %zu kernels", index,
                    m->kernel_count);
  *out_name = m->kernels[index].name;
  return TSR_SUCCESS;
}

tsr_status_t tsrKernelGetArgCount(tsr_kernel_t kernel, size_t* out_count) {
  if (!tsr_handle_is_live(kernel, TSR_MAGIC_KERNEL)) return tsr_fail_handle(__func__, "kernel");
  if (!out_count) return tsr_fail_null_output(__func__);
  *out_count = kernel->arg_count;
  return TSR_SUCCESS;
}

tsr_status_t tsrKernelGetArgInfo(tsr_kernel_t kernel, size_t index, tsr_arg_info_t* out_info) {
  if (!tsr_handle_is_live(kernel, TSR_MAGIC_KERNEL)) return tsr_fail_handle(__func__, "kernel");
  if (!out_info) return tsr_fail_null_output(__func__);
  if (index >= kernel->arg_count)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrKernelGetArgInfo: kernel '%s' has %zu arguments, asked for #%zu",
                    kernel->name, kernel->arg_count, index);
  *out_info = kernel->args[index];
  return TSR_SUCCESS;
}

tsr_status_t tsrKernelGetAttribute(tsr_kernel_t kernel, tsr_kernel_attribute_t attribute, int64_t* out_value) {
  if (!tsr_handle_is_live(kernel, TSR_MAGIC_KERNEL)) return tsr_fail_handle(__func__, "kernel");
  if (!out_value) return tsr_fail_null_output(__func__);
  switch (attribute) {
    case TSR_KERNEL_ATTR_BLOCK_X: *out_value = kernel->block[0]; return TSR_SUCCESS;
    case TSR_KERNEL_ATTR_BLOCK_Y: *out_value = kernel->block[1]; return TSR_SUCCESS;
    case TSR_KERNEL_ATTR_BLOCK_Z: *out_value = kernel->block[2]; return TSR_SUCCESS;
    case TSR_KERNEL_ATTR_WARP_SIZE: *out_value = kernel->warp_size; return TSR_SUCCESS;
    case TSR_KERNEL_ATTR_SMEM_BYTES: *out_value = kernel->smem_bytes; return TSR_SUCCESS;
    case TSR_KERNEL_ATTR_REGS: *out_value = kernel->regs; return TSR_SUCCESS;
    case TSR_KERNEL_ATTR_FLAGS: *out_value = kernel->flags; return TSR_SUCCESS;
  }
  return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrKernelGetAttribute: unknown attribute %d", (int)attribute);
}

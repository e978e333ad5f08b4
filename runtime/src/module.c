/* module.c — building a module from a validated image (copying what outlives the caller's buffer, loading
 * code through the context's backend), kernel lookup and introspection, and module teardown. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "handles.h"
#include "image.h"
#include "objects.h"
#include "trace.h"

static atomic_uint_fast64_t module_serials;

static bool runs_here(const tsr_backend_t* backend, const tsr_image_t* img, const tsr_image_kernel_t* k) {
  return strcmp(tsr_image_str(img, k->target), backend->target) == 0 && backend->runs_arch(tsr_image_str(img, k->arch));
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
                    sorted[i]->arch);
  free(sorted);
  return st;
}

/* The loaded object of a code section, loading it on first use. `loaded_from` holds the strtab offsets of
 * the section names already loaded, parallel to m->code. */
static tsr_status_t code_for(struct tsr_context* ctx, struct tsr_module* m, const tsr_image_t* img, uint32_t section,
                             uint32_t* loaded_from, void** out) {
  for (size_t i = 0; i < m->code_count; i++)
    if (strcmp(tsr_image_str(img, loaded_from[i]), tsr_image_str(img, section)) == 0) {
      *out = m->code[i];
      return TSR_SUCCESS;
    }
  const tsr_image_section_t* s = tsr_image_find_section(img, tsr_image_str(img, section));
  if (!s) return TSR_ERROR_BAD_IMAGE;  /* unreachable: the parser resolved every kernel's section */
  tsr_status_t st = ctx->backend->code_load(ctx->backend_state, s->data, s->size, s->name, &m->code[m->code_count]);
  if (st) return st;
  loaded_from[m->code_count] = section;
  *out = m->code[m->code_count++];
  return TSR_SUCCESS;
}

static tsr_status_t build(struct tsr_context* ctx, struct tsr_module* m, const tsr_image_t* img) {
  const tsr_backend_t* backend = ctx->backend;
  size_t runnable = 0, arg_total = 0, prop_total = 0;
  for (uint32_t k = 0; k < img->kernel_count; k++)
    if (runs_here(backend, img, &img->kernels[k])) {
      runnable++;
      arg_total += img->kernels[k].arg_count;
      prop_total += img->kernels[k].prop_count;
    }
  size_t foreign = img->kernel_count - runnable;
  m->strtab = malloc(img->strtab_size);
  m->dims = malloc((img->dim_count + (size_t)1) * sizeof *m->dims);
  m->args = calloc(arg_total + 1, sizeof *m->args);
  m->props = calloc(prop_total + 1, sizeof *m->props);
  m->kernels = calloc(runnable + 1, sizeof *m->kernels);
  m->foreign = calloc(foreign + 1, sizeof *m->foreign);
  m->code = calloc(runnable + 1, sizeof *m->code);
  uint32_t* loaded_from = calloc(runnable + 1, sizeof *loaded_from);
  if (!m->strtab || !m->dims || !m->args || !m->props || !m->kernels || !m->foreign || !m->code || !loaded_from) {
    free(loaded_from);
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory loading a module");
  }
  memcpy(m->strtab, img->strtab, img->strtab_size);
  memcpy(m->dims, img->dims, img->dim_count * sizeof *m->dims);

  tsr_status_t st = TSR_SUCCESS;
  tsr_arg_info_t* next_arg = m->args;
  tsr_property_t* next_prop = m->props;
  for (uint32_t k = 0; k < img->kernel_count && !st; k++) {
    const tsr_image_kernel_t* ik = &img->kernels[k];
    if (!runs_here(backend, img, ik)) {
      m->foreign[m->foreign_count++] = (tsr_foreign_kernel_t){
          m->strtab + ik->name, m->strtab + ik->target, m->strtab + ik->arch};
      continue;
    }
    struct tsr_kernel* kernel = &m->kernels[m->kernel_count++];
    *kernel = (struct tsr_kernel){
        .magic = TSR_MAGIC_KERNEL, .module = m, .name = m->strtab + ik->name,
        .entry_symbol = m->strtab + ik->entry, .target = m->strtab + ik->target, .arch = m->strtab + ik->arch,
        .section = m->strtab + ik->section,
        .block = {ik->block[0], ik->block[1], ik->block[2]}, .warp_size = ik->warp_size, .smem_bytes = ik->smem_bytes,
        .regs = ik->regs, .flags = ik->flags,
        .arg_count = ik->arg_count, .args = next_arg, .prop_count = ik->prop_count, .props = next_prop};
    for (uint32_t i = 0; i < ik->arg_count; i++) {
      const tsr_image_arg_t* a = &img->args[ik->arg_first + i];
      *next_arg++ = (tsr_arg_info_t){m->strtab + a->name, a->kind, a->dtype, a->rank, a->flags,
                                     a->rank ? m->dims + a->dims_first : NULL};
    }
    for (uint32_t i = 0; i < ik->prop_count; i++) {
      const tsr_image_prop_t* p = &img->props[ik->prop_first + i];
      *next_prop++ = (tsr_property_t){m->strtab + p->key, m->strtab + p->value};
    }
    void* code;
    st = code_for(ctx, m, img, ik->section, loaded_from, &code);
    if (!st && !backend->code_entry(code, tsr_image_str(img, ik->entry), &kernel->entry))
      st = tsr_fail(TSR_ERROR_BAD_IMAGE, "bad image: kernel '%s': entry symbol '%s' is not exported by section '%s'",
                    kernel->name, tsr_image_str(img, ik->entry), tsr_image_str(img, ik->section));
  }
  free(loaded_from);
  if (!st) st = check_unique_names(m);
  return st ? st : tsr_module_load_functions(m, img);
}

/* Frees the module and what build() made. It must no longer be registered (or never have been). */
static void destroy(struct tsr_context* ctx, struct tsr_module* m) {
  for (size_t i = 0; i < m->code_count; i++) ctx->backend->code_unload(m->code[i]);
  tsr_module_free_functions(m);
  free(m->code);
  free(m->foreign);
  free(m->kernels);
  free(m->props);
  free(m->args);
  free(m->dims);
  free(m->strtab);
  free(m->image);
  pthread_cond_destroy(&m->idle);
  pthread_mutex_destroy(&m->busy_lock);
  free(m);
}

/* Registers the kernels, then the module (which links it into its context). */
static tsr_status_t publish(struct tsr_context* ctx, struct tsr_module* m) {
  tsr_handles_lock();
  size_t added = 0;
  tsr_status_t st = TSR_SUCCESS;
  while (!st && added < m->kernel_count) st = tsr_handle_add_locked(&m->kernels[added++]);
  size_t functions = 0;
  while (!st && functions < m->function_count) st = tsr_handle_add_locked(&m->functions[functions++]);
  if (st) {
    for (size_t i = 0; i < added; i++) tsr_handle_remove_locked(&m->kernels[i]);
    for (size_t i = 0; i < m->kernel_count; i++) m->kernels[i].magic = 0;
    for (size_t i = 0; i < functions; i++) tsr_handle_remove_locked(&m->functions[i]);
    for (size_t i = 0; i < m->function_count; i++) m->functions[i].magic = 0;
  }
  tsr_handles_unlock();
  if (!st && (st = tsr_object_publish(ctx, &m->obj, TSR_MAGIC_MODULE, "tsrLoadModule"))) {
    tsr_handles_lock();
    tsr_module_retire_kernels_locked(m);
    tsr_handles_unlock();
  }
  return st;
}

static tsr_status_t load(tsr_context_t ctx, const void* image, size_t image_size, tsr_module_t* out_module) {
  tsr_image_t img;
  tsr_status_t st = tsr_image_parse(image, image_size, &img);
  if (st) return st;
  struct tsr_module* m = calloc(1, sizeof *m);
  uint8_t* copy = malloc(image_size ? image_size : 1);
  if (!m || !copy) {
    free(m);
    free(copy);
    tsr_image_release(&img);
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory loading a module");
  }
  memcpy(copy, image, image_size);
  m->image = copy;
  m->image_size = image_size;
  m->serial = atomic_fetch_add(&module_serials, 1) + 1;
  pthread_mutex_init(&m->busy_lock, NULL);
  pthread_cond_init(&m->idle, NULL);
  st = build(ctx, m, &img);
  tsr_image_release(&img);
  if (!st) st = publish(ctx, m);
  if (st) {
    destroy(ctx, m);
    return st;
  }
  *out_module = m;
  return TSR_SUCCESS;
}

tsr_status_t tsrLoadModule(tsr_context_t ctx, const void* image, size_t image_size, tsr_module_t* out_module) {
  tsr_status_t st = tsr_check_context(ctx, __func__);
  if (st) return st;
  if (!out_module) return tsr_fail_null_output(__func__);
  bool traced = tsr_trace_push(TSR_TRACE_HOST, "load module");
  st = load(ctx, image, image_size, out_module);
  if (traced) tsr_trace_pop();
  return st;
}

void tsr_module_retire_kernels_locked(struct tsr_module* m) {
  for (size_t i = 0; i < m->kernel_count; i++) {
    tsr_handle_remove_locked(&m->kernels[i]);
    m->kernels[i].magic = 0;
  }
  for (size_t i = 0; i < m->function_count; i++) {
    tsr_handle_remove_locked(&m->functions[i]);
    m->functions[i].magic = 0;
  }
}

void tsr_module_free(struct tsr_module* m) {
  pthread_mutex_lock(&m->busy_lock);
  while (m->busy) pthread_cond_wait(&m->idle, &m->busy_lock);
  pthread_mutex_unlock(&m->busy_lock);
  destroy(m->obj.context, m);
}

tsr_status_t tsrUnloadModule(tsr_module_t m) {
  tsr_handles_lock();
  bool live = tsr_handle_is_live_locked(m, TSR_MAGIC_MODULE);
  if (live) {
    tsr_module_retire_kernels_locked(m);
    tsr_object_retire_locked(&m->obj);
  }
  tsr_handles_unlock();
  if (!live) return tsr_fail_handle(__func__, "module");
  tsr_module_free(m);
  return TSR_SUCCESS;
}

tsr_status_t tsrRetainModule(tsr_module_t m) { return tsr_object_retain(m, TSR_MAGIC_MODULE, __func__, "module"); }
tsr_status_t tsrReleaseModule(tsr_module_t m) { return tsr_object_release(m, TSR_MAGIC_MODULE, __func__, "module"); }

bool tsr_kernel_acquire_locked(tsr_kernel_t kernel, uint64_t module_serial) {
  if (!tsr_handle_is_live_locked(kernel, TSR_MAGIC_KERNEL)) return false;
  if (module_serial && kernel->module->serial != module_serial) return false;
  tsr_kernel_hold(kernel);
  return true;
}

tsr_status_t tsr_kernel_acquire(tsr_kernel_t kernel, const char* function) {
  tsr_handles_lock();
  bool live = tsr_kernel_acquire_locked(kernel, 0);
  tsr_handles_unlock();
  return live ? TSR_SUCCESS : tsr_fail_handle(function, "kernel");
}

void tsr_kernel_hold(tsr_kernel_t kernel) {
  pthread_mutex_lock(&kernel->module->busy_lock);
  kernel->module->busy++;
  pthread_mutex_unlock(&kernel->module->busy_lock);
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
  if (elsewhere) {
    tsr_device_properties_t props;
    struct tsr_context* ctx = m->obj.context;
    const char* arch = ctx->backend->properties(ctx->backend_state, &props) ? "?" : props.arch;
    return tsr_fail(TSR_ERROR_NOT_FOUND, "kernel '%s' has no code this runtime can run (%s/%s); the image has it "
                    "for %s", name, ctx->backend->target, arch, msg);
  }
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

tsr_status_t tsrKernelGetProperty(tsr_kernel_t kernel, const char* key, const char** out_value) {
  if (!tsr_handle_is_live(kernel, TSR_MAGIC_KERNEL)) return tsr_fail_handle(__func__, "kernel");
  if (!out_value) return tsr_fail_null_output(__func__);
  if (!key) return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrKernelGetProperty: the key is NULL");
  for (size_t i = 0; i < kernel->prop_count; i++)
    if (strcmp(kernel->props[i].key, key) == 0) {
      *out_value = kernel->props[i].value;
      return TSR_SUCCESS;
    }
  return tsr_fail(TSR_ERROR_NOT_FOUND, "kernel '%s' has no property '%s'", kernel->name, key);
}

/*
 * tessera.h — the C API of libtessera, the runtime that loads `.tessera` images and launches their kernels.
 *
 * Plain C11; usable from C++ (extern "C"). The reference page is docs/c-api.md; the image format and the
 * launch-argument convention are in docs/image-format.md.
 *
 * Conventions shared by every function below:
 *  - Every function returns a tsr_status_t (tsrGetErrorString, tsrGetStatusName and tsrGetLastErrorMessage
 *    return strings). On failure, output parameters are left untouched and tsrGetLastErrorMessage() returns
 *    a sentence saying what was wrong.
 *  - No function aborts or exits the host on any input. Handles are opaque; a NULL handle, a handle of the
 *    wrong type, or a handle already destroyed returns TSR_ERROR_INVALID_HANDLE (stale handles are detected
 *    as long as their address has not been reused by a newer object).
 *  - Output pointers must not be NULL (TSR_ERROR_INVALID_VALUE).
 */
#ifndef TESSERA_TESSERA_H_
#define TESSERA_TESSERA_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define TSR_API
#elif defined(TSR_BUILDING_LIBRARY)
#define TSR_API __attribute__((visibility("default")))
#else
#define TSR_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------------------
 * Versions
 * ------------------------------------------------------------------------------------------------------- */

/* Version of this library (API additions bump MINOR, fixes bump PATCH). */
#define TSR_VERSION_MAJOR 0
#define TSR_VERSION_MINOR 1
#define TSR_VERSION_PATCH 0

/* Version of the image ABI this library loads (docs/image-format.md, "The ABI note"): an image is accepted
 * when its major equals TSR_ABI_MAJOR and its minor is at most TSR_ABI_MINOR. */
#define TSR_ABI_MAJOR 1
#define TSR_ABI_MINOR 0

/* ---------------------------------------------------------------------------------------------------------
 * Status codes
 * ------------------------------------------------------------------------------------------------------- */

/* One enum for the whole API. 0-4 keep the ABI draft's numbers; the architecture spec's short names are
 * aliases of the same values. The numbers are part of the ABI and never change. */
typedef enum tsr_status {
  TSR_SUCCESS = 0,
  TSR_ERROR_INIT_FAIL = 1,       /* the runtime or a backend could not start (threads, code loading) */
  TSR_ERROR_INVALID_HANDLE = 2,  /* NULL, wrong-type or destroyed handle; a non-NULL stream */
  TSR_ERROR_OUT_OF_MEMORY = 3,   /* host or device memory exhausted */
  TSR_ERROR_UNSUPPORTED = 4,     /* valid request this build or backend cannot serve */
  TSR_ERROR_INVALID_VALUE = 5,   /* an argument is out of range (NULL output, bad launch, unknown pointer) */
  TSR_ERROR_TIMEOUT = 6,         /* a wait ran past its limit */
  TSR_ERROR_BAD_IMAGE = 7,       /* the image is malformed, truncated or its code cannot be loaded */
  TSR_ERROR_ABI_MISMATCH = 8,    /* the image's ABI version is not one this library loads */
  TSR_ERROR_NOT_FOUND = 9,       /* no such kernel (for this runtime's backends) */
  TSR_ERROR_LAUNCH_FAILED = 10,  /* the backend could not run a validated launch */

  /* Short names from the architecture spec (§3.5). */
  TSR_EOOM = TSR_ERROR_OUT_OF_MEMORY,
  TSR_EINVAL = TSR_ERROR_INVALID_VALUE,
  TSR_ETIMEOUT = TSR_ERROR_TIMEOUT
} tsr_status_t;

/* ---------------------------------------------------------------------------------------------------------
 * Handles
 * ------------------------------------------------------------------------------------------------------- */

/* A context owns everything created through it: modules (and so kernels), allocations and the CPU worker
 * threads. Destroying it releases all of them.
 * Thread-safety: every function taking a context may be called from several threads at once, except
 * tsrDestroyContext, which must not race with any other use of the context or of what it owns. */
typedef struct tsr_context* tsr_context_t;

/* A module is one loaded image. It is owned by its context.
 * Thread-safety: a module is immutable after loading; query it from any thread. tsrUnloadModule must not
 * race with other uses of the module, except that it waits for launches of its kernels already running. */
typedef struct tsr_module* tsr_module_t;

/* A kernel is a launchable entry of a module; it lives as long as its module and needs no release.
 * Thread-safety: launch from any number of threads; launches on one context run one at a time. */
typedef struct tsr_kernel* tsr_kernel_t;

/* A stream orders work. Only the default stream exists in this version: pass NULL. Any other value returns
 * TSR_ERROR_INVALID_HANDLE. */
typedef struct tsr_stream* tsr_stream_t;

/* ---------------------------------------------------------------------------------------------------------
 * Library information and errors
 * ------------------------------------------------------------------------------------------------------- */

/* Version of this library: TSR_VERSION_MAJOR.MINOR.PATCH as compiled into it. Thread-safe. */
TSR_API tsr_status_t tsrGetVersion(int* major, int* minor, int* patch);

/* Image ABI version this library loads: TSR_ABI_MAJOR.MINOR as compiled into it. Thread-safe. */
TSR_API tsr_status_t tsrGetAbiVersion(uint32_t* major, uint32_t* minor);

/* A short English description of a status ("the image is malformed …"). Never NULL; unknown codes get
 * "unknown status code". Static storage. Thread-safe. */
TSR_API const char* tsrGetErrorString(tsr_status_t status);

/* The enumerator's name ("TSR_ERROR_BAD_IMAGE"). Never NULL; unknown codes get "TSR_STATUS_UNKNOWN".
 * Static storage. Thread-safe. */
TSR_API const char* tsrGetStatusName(tsr_status_t status);

/* Detail of the most recent failure on the calling thread, e.g. "kernel 'saxpy' expects 4 arguments, got 3".
 * Like errno, successful calls leave it unchanged; "" when nothing has failed on this thread yet.
 * Never NULL. The string is thread-local and valid until the next failing call on this thread. */
TSR_API const char* tsrGetLastErrorMessage(void);

/* ---------------------------------------------------------------------------------------------------------
 * Contexts
 * ------------------------------------------------------------------------------------------------------- */

/* Creates a context for the backends of this build (the CPU backend in this version). Worker threads are
 * started lazily by the first launch. */
TSR_API tsr_status_t tsrCreateContext(tsr_context_t* out_context);

/* Destroys a context: waits for running launches, unloads its modules, frees its allocations and stops its
 * threads. Every handle and pointer obtained through it becomes invalid. A second destroy of the same
 * context returns TSR_ERROR_INVALID_HANDLE. */
TSR_API tsr_status_t tsrDestroyContext(tsr_context_t context);

/* Waits until all work submitted to the context has finished. CPU launches are synchronous, so on the CPU
 * backend this only validates the handle. */
TSR_API tsr_status_t tsrSynchronize(tsr_context_t context);

/* ---------------------------------------------------------------------------------------------------------
 * Modules and kernels
 * ------------------------------------------------------------------------------------------------------- */

/* Loads a `.tessera` image from memory. The image is fully validated (docs/image-format.md) and what the
 * module needs is copied: the caller may free `image` as soon as this returns.
 * Kernels whose target/arch no backend of this runtime runs (e.g. `ptx` on a CPU-only build, `aarch64`
 * code on an x86-64 host) are skipped; the module still loads.
 * Errors: TSR_ERROR_BAD_IMAGE (malformed image, or CPU code that cannot be loaded, e.g. a missing entry
 * symbol), TSR_ERROR_ABI_MISMATCH (see TSR_ABI_MAJOR), TSR_ERROR_OUT_OF_MEMORY, TSR_ERROR_INVALID_VALUE
 * (NULL image). */
TSR_API tsr_status_t tsrLoadModule(tsr_context_t context, const void* image, size_t image_size,
                                   tsr_module_t* out_module);

/* Unloads a module and its code; its kernel handles become invalid. Waits for running launches of its
 * kernels. Destroying the context unloads its modules too. */
TSR_API tsr_status_t tsrUnloadModule(tsr_module_t module);

/* Looks a kernel up by its metadata name (not NULL). TSR_ERROR_NOT_FOUND when the module has no kernel of
 * that name that this runtime can run; the error message names the targets the image does have for it. */
TSR_API tsr_status_t tsrGetKernel(tsr_module_t module, const char* name, tsr_kernel_t* out_kernel);

/* Number of kernels of the module this runtime can run (skipped kernels are not counted). */
TSR_API tsr_status_t tsrModuleGetKernelCount(tsr_module_t module, size_t* out_count);

/* Name of runnable kernel `index` (0 <= index < count). The string lives as long as the module. */
TSR_API tsr_status_t tsrModuleGetKernelName(tsr_module_t module, size_t index, const char** out_name);

/* Number of launch arguments the kernel takes (the `nargs` tsrLaunch expects). */
TSR_API tsr_status_t tsrKernelGetArgCount(tsr_kernel_t kernel, size_t* out_count);

/* Kinds of launch arguments (docs/image-format.md, "Argument record"). */
typedef enum tsr_arg_kind {
  TSR_ARG_SCALAR = 0,    /* args[i] points to the value, in its dtype */
  TSR_ARG_TENSOR = 1,    /* args[i] points to a non-NULL void*: the buffer */
  TSR_ARG_DIMENSION = 2  /* args[i] points to an int64_t extent >= 0 */
} tsr_arg_kind_t;

/* Description of one launch argument. Strings and `dims` live as long as the module. */
typedef struct tsr_arg_info {
  const char* name;     /* parameter name, or the dimension's symbol */
  uint32_t kind;        /* a tsr_arg_kind_t */
  uint32_t dtype;       /* dtype code of docs/image-format.md (tensor: element type) */
  uint32_t rank;        /* tensor rank; 0 otherwise */
  uint32_t flags;       /* bit 0: the kernel never writes this tensor */
  const int64_t* dims;  /* `rank` entries: >= 0 static extent; < 0 the extent is argument -(d + 1) */
} tsr_arg_info_t;

/* Describes argument `index` (0 <= index < arg count) of a kernel. */
TSR_API tsr_status_t tsrKernelGetArgInfo(tsr_kernel_t kernel, size_t index, tsr_arg_info_t* out_info);

/* Fixed properties of a kernel from its metadata, queried one at a time so that new ones can be added
 * without changing any struct. */
typedef enum tsr_kernel_attribute {
  TSR_KERNEL_ATTR_BLOCK_X = 0,     /* compiled block shape; 0 = any (then all three are 0) */
  TSR_KERNEL_ATTR_BLOCK_Y = 1,
  TSR_KERNEL_ATTR_BLOCK_Z = 2,
  TSR_KERNEL_ATTR_WARP_SIZE = 3,   /* lanes per warp the kernel assumes */
  TSR_KERNEL_ATTR_SMEM_BYTES = 4,  /* static shared memory per block */
  TSR_KERNEL_ATTR_REGS = 5,        /* registers per thread; 0 when unknown */
  TSR_KERNEL_ATTR_FLAGS = 6        /* metadata flags; bit 0: SIMT kernel */
} tsr_kernel_attribute_t;

/* Reads one attribute. Unknown attributes return TSR_ERROR_INVALID_VALUE. */
TSR_API tsr_status_t tsrKernelGetAttribute(tsr_kernel_t kernel, tsr_kernel_attribute_t attribute, int64_t* out_value);

/* ---------------------------------------------------------------------------------------------------------
 * Memory
 * ------------------------------------------------------------------------------------------------------- */

/* Flags of tsrAlloc. No flag is defined yet beyond the default. */
#define TSR_ALLOC_DEFAULT 0u

/* Alignment, in bytes, of every tsrAlloc result (the ABI's global-memory guarantee). */
#define TSR_ALLOC_ALIGNMENT 64u

/* Allocates `bytes` of device memory, TSR_ALLOC_ALIGNMENT-aligned, tracked by the context (freed with it).
 * On the CPU backend device memory is host memory. `bytes` may be 0: the result is still a distinct pointer
 * to free. Unknown flags return TSR_ERROR_INVALID_VALUE. */
TSR_API tsr_status_t tsrAlloc(tsr_context_t context, size_t bytes, uint32_t flags, void** out_ptr);

/* Frees a pointer returned by tsrAlloc on the same context. Any other pointer (including one already freed)
 * returns TSR_ERROR_INVALID_VALUE and changes nothing. */
TSR_API tsr_status_t tsrFree(tsr_context_t context, void* ptr);

/* Direction of a copy. A "device" side must lie inside one tsrAlloc allocation of the context. */
typedef enum tsr_memcpy_kind {
  TSR_MEMCPY_HOST_TO_HOST = 0,
  TSR_MEMCPY_HOST_TO_DEVICE = 1,
  TSR_MEMCPY_DEVICE_TO_HOST = 2,
  TSR_MEMCPY_DEVICE_TO_DEVICE = 3,
  TSR_MEMCPY_DEFAULT = 4  /* infer from the pointers; no range check */
} tsr_memcpy_kind_t;

/* Copies `bytes` (ranges may overlap). Synchronous on the CPU backend. NULL pointers are refused unless
 * `bytes` is 0. */
TSR_API tsr_status_t tsrMemcpy(tsr_context_t context, void* dst, const void* src, size_t bytes,
                               tsr_memcpy_kind_t kind);

/* ---------------------------------------------------------------------------------------------------------
 * Launch
 * ------------------------------------------------------------------------------------------------------- */

/* Grid and block shape of a launch, and dynamic shared memory per block. */
typedef struct tsr_launch {
  uint32_t grid_x, grid_y, grid_z;
  uint32_t block_x, block_y, block_z;
  uint32_t smem_bytes;
} tsr_launch_t;

/* Limits of the CPU backend: shared memory per block (static + dynamic) and threads per block. */
#define TSR_CPU_MAX_SMEM_BYTES (64u * 1024u)
#define TSR_CPU_MAX_BLOCK_THREADS 1024u

/* Launches a kernel over a grid of blocks. `args` holds `nargs` pointers, one per argument of the kernel,
 * each pointing to the argument's value (docs/image-format.md, "Launch arguments"); `args` may be NULL only
 * when the kernel takes no arguments. `stream` must be NULL (the default stream).
 *
 * Everything is validated before anything runs; a refused launch returns TSR_ERROR_INVALID_VALUE with a
 * message: nargs != the kernel's argument count, a NULL slot, a NULL tensor buffer, a negative dimension,
 * a grid or block dimension of 0, a block other than the one the kernel was compiled for (when its metadata
 * fixes one), more than TSR_CPU_MAX_BLOCK_THREADS threads per block, or more than TSR_CPU_MAX_SMEM_BYTES of
 * shared memory. Kernels without the SIMT flag return TSR_ERROR_UNSUPPORTED.
 *
 * CPU backend: synchronous — returns after every block has finished. Blocks run on the context's worker
 * threads (TESSERA_NUM_THREADS of them, default: online CPUs), in any order; launches on one context run
 * one at a time. */
TSR_API tsr_status_t tsrLaunch(tsr_kernel_t kernel, tsr_stream_t stream, tsr_launch_t launch, void** args,
                               size_t nargs);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#include "tessera/abi_draft.h"

#endif  /* TESSERA_TESSERA_H_ */

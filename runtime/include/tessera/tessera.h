/*
 * tessera.h — the C API of libtessera, the runtime that loads `.tessera` images and launches their kernels.
 *
 * Plain C11; usable from C++ (extern "C"). This header includes the rest of the API: <tessera/device.h>
 * (backends, properties, limits), <tessera/execution.h> (streams, events, graphs), <tessera/comm.h>
 * (communicators: collectives between processes over MPI or NCCL), <tessera/telemetry.h> (metrics, trace
 * ranges, crash capture), <tessera/abi_draft.h> (the ABI draft's names), <tessera/operator.h> (operators
 * across the ABI: TessOperatorDesc) and <tessera/dlpack.h> (DLPack's
 * DLTensor, which function calls take). The reference page
 * is docs/c-api.md; the image format and the launch-argument convention are in docs/image-format.md.
 *
 * Conventions shared by every function of the API:
 *  - Every function returns a tsr_status_t (tsrGetErrorString, tsrGetStatusName and tsrGetLastErrorMessage
 *    return strings). On failure, output parameters are left untouched and tsrGetLastErrorMessage() returns
 *    a sentence saying what was wrong.
 *  - No function aborts or exits the host on any input. Handles are opaque; a NULL handle, a handle of the
 *    wrong type, or a handle already destroyed returns TSR_ERROR_INVALID_HANDLE (stale handles are detected
 *    as long as their address has not been reused by a newer object).
 *  - Output pointers must not be NULL (TSR_ERROR_INVALID_VALUE).
 *  - Options structs are filled by their *Initialize function first, then changed field by field, so that
 *    fields added later get their defaults.
 *  - Handles are reference-counted: a create/load returns one reference; tsrRetain* adds one, tsrRelease*
 *    drops one, and the last release destroys the object. tsrDestroyContext and tsrUnloadModule destroy at
 *    once whatever the count; for streams, events and graphs, tsrDestroy* is the same as tsrRelease*.
 *    Destroying a context destroys everything created through it.
 *
 * Thread-safety (docs/c-api.md, "Thread safety", has the table): every function may be called from any
 * thread, and concurrently with any other, except that an object must not be destroyed (its last reference
 * released, its context destroyed, its module unloaded) while another thread is still using it.
 */
#ifndef TESSERA_TESSERA_H_
#define TESSERA_TESSERA_H_

#include <stddef.h>
#include <stdint.h>

#include "tessera/dlpack.h"

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
#define TSR_VERSION_MINOR 2
#define TSR_VERSION_PATCH 0

/* Version of the image ABI this library loads (docs/image-format.md, "The ABI note"): an image is accepted
 * when its major equals TSR_ABI_MAJOR and its minor is at most TSR_ABI_MINOR. */
#define TSR_ABI_MAJOR 1
#define TSR_ABI_MINOR 0

/* ---------------------------------------------------------------------------------------------------------
 * Status codes
 * ------------------------------------------------------------------------------------------------------- */

/* One enum for the whole API. 0-4 keep the ABI draft's numbers; the architecture spec's short names are
 * aliases of the same values. The numbers are part of the ABI and never change; new codes are appended. */
typedef enum tsr_status {
  TSR_SUCCESS = 0,
  TSR_ERROR_INIT_FAIL = 1,       /* the runtime or a backend could not start (threads, code loading) */
  TSR_ERROR_INVALID_HANDLE = 2,  /* NULL, wrong-type or destroyed handle */
  TSR_ERROR_OUT_OF_MEMORY = 3,   /* host or device memory exhausted */
  TSR_ERROR_UNSUPPORTED = 4,     /* valid request this build or backend cannot serve */
  TSR_ERROR_INVALID_VALUE = 5,   /* an argument is out of range (NULL output, bad launch, unknown pointer) */
  TSR_ERROR_TIMEOUT = 6,         /* a wait ran past its limit */
  TSR_ERROR_BAD_IMAGE = 7,       /* the image is malformed, truncated or its code cannot be loaded */
  TSR_ERROR_ABI_MISMATCH = 8,    /* the image's ABI version is not one this library loads */
  TSR_ERROR_NOT_FOUND = 9,       /* no such kernel (for this runtime's backends) or property */
  TSR_ERROR_LAUNCH_FAILED = 10,  /* the backend could not run a validated launch */
  TSR_ERROR_NOT_READY = 11,      /* queried work has not finished yet (not a failure: no message is set) */
  TSR_ERROR_MEMORY_FAULT = 12,   /* a bad memory access refused or caught: extents past a known allocation (any
                                  * mode); guard page, canary, freed memory (debug mode) */

  /* Short names from the architecture spec (§3.5). */
  TSR_EOOM = TSR_ERROR_OUT_OF_MEMORY,
  TSR_EINVAL = TSR_ERROR_INVALID_VALUE,
  TSR_ETIMEOUT = TSR_ERROR_TIMEOUT
} tsr_status_t;

/* ---------------------------------------------------------------------------------------------------------
 * Handles
 * ------------------------------------------------------------------------------------------------------- */

/* A context owns everything created through it: modules (and so kernels), allocations, streams, events,
 * graphs and the backend's worker threads. Destroying it releases all of them. */
typedef struct tsr_context* tsr_context_t;

/* A module is one loaded image, owned by its context. Immutable after loading. */
typedef struct tsr_module* tsr_module_t;

/* A kernel is a launchable entry of a module; it lives as long as its module and needs no release. */
typedef struct tsr_kernel* tsr_kernel_t;

/* A stream is a queue of work run in order (<tessera/execution.h>). NULL is the synchronous default stream:
 * work given to it has finished when the call returns. */
typedef struct tsr_stream* tsr_stream_t;

/* ---------------------------------------------------------------------------------------------------------
 * Library information and errors
 * ------------------------------------------------------------------------------------------------------- */

/* Version of this library: TSR_VERSION_MAJOR.MINOR.PATCH as compiled into it. */
TSR_API tsr_status_t tsrGetVersion(int* major, int* minor, int* patch);

/* Image ABI version this library loads: TSR_ABI_MAJOR.MINOR as compiled into it. */
TSR_API tsr_status_t tsrGetAbiVersion(uint32_t* major, uint32_t* minor);

/* A short English description of a status ("the image is malformed …"). Never NULL; unknown codes get
 * "unknown status code". Static storage. */
TSR_API const char* tsrGetErrorString(tsr_status_t status);

/* The enumerator's name ("TSR_ERROR_BAD_IMAGE"). Never NULL; unknown codes get "TSR_STATUS_UNKNOWN".
 * Static storage. */
TSR_API const char* tsrGetStatusName(tsr_status_t status);

/* Detail of the most recent failure on the calling thread, e.g. "kernel 'saxpy' expects 4 arguments, got 3".
 * Like errno, successful calls (and TSR_ERROR_NOT_READY) leave it unchanged; "" when nothing has failed on
 * this thread yet. Never NULL. The string is thread-local and valid until the next failing call on this
 * thread. */
TSR_API const char* tsrGetLastErrorMessage(void);

/* ---------------------------------------------------------------------------------------------------------
 * Contexts
 * ------------------------------------------------------------------------------------------------------- */

/* Flags of tsr_context_options_t. */
#define TSR_CONTEXT_DEBUG 0x1u  /* debug mode: guarded allocations, poisoned frees, bounds-checked launches */

typedef struct tsr_context_options {
  const char* backend;      /* backend name (<tessera/device.h>); NULL: $TESSERA_BACKEND if set, else "cpu" */
  uint32_t flags;           /* TSR_CONTEXT_*; $TESSERA_DEBUG=1 adds TSR_CONTEXT_DEBUG */
  uint32_t worker_threads;  /* CPU worker threads; 0: $TESSERA_NUM_THREADS if set, else one per online CPU */
  uint32_t wait_timeout_ms; /* the watchdog: the limit of waits that name none (tsrStreamSynchronize,
                             * tsrEventSynchronize, tsrStreamWaitEvent on the NULL stream, tsrSynchronize),
                             * which then return TSR_ERROR_TIMEOUT (docs/c-api.md, "Timeouts"); 0:
                             * $TESSERA_WAIT_TIMEOUT_MS if set, else none */
} tsr_context_options_t;

/* Sets the defaults: no backend named, no flags, 0 worker threads and no watchdog (decided by the environment). */
TSR_API tsr_status_t tsrContextOptionsInitialize(tsr_context_options_t* options);

/* Creates a context with the given options (NULL: the defaults). An unknown or unavailable backend returns
 * TSR_ERROR_UNSUPPORTED with a message listing the available ones; unknown flags, or a $TESSERA_WAIT_TIMEOUT_MS
 * that is not a number of milliseconds, TSR_ERROR_INVALID_VALUE.
 * Worker threads start lazily with the first launch. When $TESSERA_METRICS names a file and no metrics log is
 * open yet, it is opened here (<tessera/telemetry.h>); failing to open it fails the creation. */
TSR_API tsr_status_t tsrCreateContextWithOptions(const tsr_context_options_t* options, tsr_context_t* out_context);

/* Same as tsrCreateContextWithOptions(NULL, out_context). */
TSR_API tsr_status_t tsrCreateContext(tsr_context_t* out_context);

/* Destroys a context whatever its reference count: waits for the work queued on its streams, then destroys
 * its streams, events, graphs, modules and allocations and stops its threads. Every handle and pointer
 * obtained through it becomes invalid. A second destroy returns TSR_ERROR_INVALID_HANDLE. Must not race with
 * any other use of the context or of what it owns. */
TSR_API tsr_status_t tsrDestroyContext(tsr_context_t context);

/* Adds / drops a reference; dropping the last one is tsrDestroyContext. */
TSR_API tsr_status_t tsrRetainContext(tsr_context_t context);
TSR_API tsr_status_t tsrReleaseContext(tsr_context_t context);

/* *out_debug = 1 when the context is in debug mode (TSR_CONTEXT_DEBUG or $TESSERA_DEBUG), else 0. */
TSR_API tsr_status_t tsrContextIsDebug(tsr_context_t context, int* out_debug);

/* Waits until all work submitted to the context's streams has finished. Returns the first error that an
 * operation on one of its streams reported since that stream last reported (see tsrStreamSynchronize).
 * Limited by the context's watchdog (wait_timeout_ms) when it has one: TSR_ERROR_TIMEOUT then. */
TSR_API tsr_status_t tsrSynchronize(tsr_context_t context);

/* tsrSynchronize for at most `timeout_ms` milliseconds over all the streams (0: only looks): TSR_ERROR_TIMEOUT
 * when some work is still pending then (tsrStreamSynchronizeTimeout says what state it is left in); the
 * streams that finished in time have reported their errors. Thread safety: any thread. */
TSR_API tsr_status_t tsrSynchronizeTimeout(tsr_context_t context, uint32_t timeout_ms);

/* ---------------------------------------------------------------------------------------------------------
 * Modules and kernels
 * ------------------------------------------------------------------------------------------------------- */

/* Loads a `.tessera` image from memory. The image is fully validated (docs/image-format.md) and copied: the
 * caller may free `image` as soon as this returns.
 * Kernels whose target/arch the context's backend does not run (e.g. `ptx` on the CPU backend, `aarch64`
 * code on an x86-64 host) are skipped; the module still loads.
 * The `.tessera.plan` section, when present, is read too (its functions: tsrModuleGetFunction).
 * Errors: TSR_ERROR_BAD_IMAGE (malformed image, a malformed, truncated or other-version launch plan, named by
 * function, step and member, or CPU code that cannot be loaded, e.g. a missing entry symbol), TSR_ERROR_ABI_MISMATCH (see TSR_ABI_MAJOR), TSR_ERROR_OUT_OF_MEMORY, TSR_ERROR_INVALID_VALUE
 * (NULL image). */
TSR_API tsr_status_t tsrLoadModule(tsr_context_t context, const void* image, size_t image_size,
                                   tsr_module_t* out_module);

/* Unloads a module and its code whatever its reference count; its kernel handles become invalid. Waits for
 * launches of its kernels that are running or queued on streams. Must not race with other calls on the
 * module. Destroying the context unloads its modules too. */
TSR_API tsr_status_t tsrUnloadModule(tsr_module_t module);

/* Adds / drops a reference; dropping the last one is tsrUnloadModule. */
TSR_API tsr_status_t tsrRetainModule(tsr_module_t module);
TSR_API tsr_status_t tsrReleaseModule(tsr_module_t module);

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

/* The value of a metadata property of the kernel (docs/image-format.md, "Property"), e.g. "tile.M" or
 * "compiler"; TSR_ERROR_NOT_FOUND when the kernel has none of that key. The string lives as long as the
 * module. */
TSR_API tsr_status_t tsrKernelGetProperty(tsr_kernel_t kernel, const char* key, const char** out_value);

/* ---------------------------------------------------------------------------------------------------------
 * Memory
 * ------------------------------------------------------------------------------------------------------- */

/* Flags of tsrAlloc. */
#define TSR_ALLOC_DEFAULT 0u        /* device memory, from the context's pool */
#define TSR_ALLOC_HOST_PINNED 0x1u  /* page-locked host memory the device can read and write directly */

/* Alignment, in bytes, of every tsrAlloc result (the ABI's global-memory guarantee). */
#define TSR_ALLOC_ALIGNMENT 64u

/* Allocates `bytes`, TSR_ALLOC_ALIGNMENT-aligned, tracked by the context (freed with it).
 * Device memory (TSR_ALLOC_DEFAULT) comes from the context's pool: freed blocks are kept for reuse by later
 * allocations of a similar size (tsrTrimMemory returns them). On the CPU backend device memory is host
 * memory. In debug mode each device allocation instead gets its own pages between two inaccessible guard
 * pages, with canary bytes filling the slack (docs/runtime.md, "Debug mode").
 * On CUDA the pool's new blocks come from a CUDA memory pool of the context's own (cuMemAllocFromPoolAsync),
 * allocated and freed in the order of CUDA's legacy default stream, which every stream of the runtime (and a
 * blocking stream of another library) is ordered with: the memory may be used on any stream once tsrAlloc
 * returns, and its free comes after all work queued before it, with no wait on the host; freed memory stays in
 * that pool until the context is destroyed or an allocation finds the device full (the pool's free memory is
 * then given back and the allocation tried once more). TESSERA_CUDA_MEMPOOL=0, a driver older than CUDA 11.2
 * or a GPU without memory pools: cuMemAlloc and cuMemFree (which waits for the whole device). Thread-safe.
 * TSR_ERROR_OUT_OF_MEMORY, with the driver's words, when the device stays full after every pool's trim.
 * Pinned host memory (TSR_ALLOC_HOST_PINNED) is locked into RAM (mlock); TSR_ERROR_OUT_OF_MEMORY when the
 * lock limit (RLIMIT_MEMLOCK) refuses it.
 * `bytes` may be 0: the result is still a distinct pointer to free. Unknown flags return
 * TSR_ERROR_INVALID_VALUE. */
TSR_API tsr_status_t tsrAlloc(tsr_context_t context, size_t bytes, uint32_t flags, void** out_ptr);

/* Frees a pointer returned by tsrAlloc on the same context (any flags). Any other pointer (including one
 * already freed, and registered memory: tsrHostUnregister, tsrDeviceUnregister) returns TSR_ERROR_INVALID_VALUE and changes nothing; in debug mode a pointer freed earlier
 * returns TSR_ERROR_MEMORY_FAULT, and so does an allocation whose canaries were overwritten (it is freed
 * all the same). Does not wait for queued work that uses the memory: synchronize first. */
TSR_API tsr_status_t tsrFree(tsr_context_t context, void* ptr);

/* Flags of tsrHostRegister. */
#define TSR_HOST_REGISTER_DEFAULT 0u
#define TSR_HOST_REGISTER_PINNED 0x1u  /* also lock the pages into RAM (mlock), as TSR_ALLOC_HOST_PINNED does */

/* Registers host memory the caller owns (host pointer import) so that the device can use it: on the CPU
 * backend it is used in place (zero copy), and it becomes a known allocation for the bounds checks of launches and
 * copies and for tsrPointerGetInfo. `bytes` >= 1; the range must not overlap a known allocation. Undo with
 * tsrHostUnregister before freeing it; destroying the context unregisters it (and never frees it). */
TSR_API tsr_status_t tsrHostRegister(tsr_context_t context, void* ptr, size_t bytes, uint32_t flags);
/* `ptr` must be the start of a range registered by tsrHostRegister (not tsrDeviceRegister): else
 * TSR_ERROR_INVALID_VALUE, changing nothing. */
TSR_API tsr_status_t tsrHostUnregister(tsr_context_t context, void* ptr);

/* Flags of tsrDeviceRegister. */
#define TSR_DEVICE_REGISTER_DEFAULT 0u

/* Registers device memory the caller owns but the context did not allocate (another library's: a DLPack
 * tensor of torch, JAX or CuPy, memory from the driver's own allocator) so that the runtime treats it as
 * device memory: copies of every kind accept it as a device side and bounds-check it as they do tsrAlloc
 * memory, launches' extent checks apply to it, tsrPointerGetInfo reports TSR_MEMORY_DEVICE_REGISTERED, and
 * tsrGetMemoryStats counts it in registered_bytes. The memory is neither copied, pinned nor freed by the
 * runtime: the caller keeps it allocated until tsrDeviceUnregister, or until the context is destroyed (which
 * forgets it). The runtime cannot verify that the range is memory of the context's device: the caller
 * promises it. On the CPU backend device memory is host memory, so any host memory may be registered so;
 * it is then device memory to the runtime's copies (tsrHostRegister instead makes it host memory).
 * Memory the context does not know needs no registration to be a launch's or a function call's tensor
 * (it is then not bounds-checked); only tsrMemcpy and tsrMemcpyAsync require it on a device side.
 * Fails with TSR_ERROR_INVALID_VALUE, changing nothing, for: a NULL `ptr`, `bytes` 0, a range that wraps
 * around the address space, unknown flags, or a range that overlaps memory the context already knows
 * (tsrAlloc, tsrHostRegister, tsrDeviceRegister; register the whole foreign allocation once instead of
 * overlapping parts of it). Thread-safe, like tsrAlloc: of two threads registering overlapping ranges
 * at once, one fails. */
TSR_API tsr_status_t tsrDeviceRegister(tsr_context_t context, void* ptr, size_t bytes, uint32_t flags);

/* Forgets device memory registered with tsrDeviceRegister on this context; `ptr` must be the registered
 * range's start. The memory stays the caller's (unregister before freeing it: the runtime must not check a
 * later allocation of the same addresses against a stale range). Queued work that uses the memory is not
 * waited for (it still runs: registration is bookkeeping only). TSR_ERROR_INVALID_VALUE, changing nothing,
 * for any other pointer: NULL, an interior pointer, a pointer already unregistered, memory from tsrAlloc or
 * tsrHostRegister (each has its own release). */
TSR_API tsr_status_t tsrDeviceUnregister(tsr_context_t context, void* ptr);

/* The device address of registered or pinned host memory (export of a host pointer to kernels). On the CPU
 * backend it is the same address. TSR_ERROR_INVALID_VALUE for memory the context does not know as host
 * memory. */
TSR_API tsr_status_t tsrHostGetDevicePointer(tsr_context_t context, void* host_ptr, void** out_device_ptr);

/* What a pointer is to a context. */
typedef enum tsr_memory_kind {
  TSR_MEMORY_UNKNOWN = 0,          /* not inside any allocation of this context */
  TSR_MEMORY_DEVICE = 1,           /* tsrAlloc(TSR_ALLOC_DEFAULT) */
  TSR_MEMORY_HOST_PINNED = 2,      /* tsrAlloc(TSR_ALLOC_HOST_PINNED) */
  TSR_MEMORY_HOST_REGISTERED = 3,  /* tsrHostRegister */
  TSR_MEMORY_DEVICE_REGISTERED = 4 /* tsrDeviceRegister */
} tsr_memory_kind_t;

typedef struct tsr_pointer_info {
  uint32_t kind;  /* a tsr_memory_kind_t */
  void* base;     /* start of the allocation holding the pointer; NULL when unknown */
  size_t bytes;   /* its size as requested */
} tsr_pointer_info_t;

/* Which allocation of the context, if any, holds `ptr`. Unknown pointers are not an error. */
TSR_API tsr_status_t tsrPointerGetInfo(tsr_context_t context, const void* ptr, tsr_pointer_info_t* out_info);

typedef struct tsr_memory_stats {
  size_t allocations;     /* live tsrAlloc allocations (all kinds) */
  size_t bytes_in_use;    /* their sizes as requested */
  size_t bytes_reserved;  /* memory held for device allocations: in use (rounded to pool blocks) + cached */
  size_t bytes_cached;    /* freed device blocks kept by the pool */
  size_t peak_bytes_in_use;
  size_t registered_bytes;  /* tsrHostRegister and tsrDeviceRegister (not in allocations or bytes_in_use) */
} tsr_memory_stats_t;

TSR_API tsr_status_t tsrGetMemoryStats(tsr_context_t context, tsr_memory_stats_t* out_stats);

/* Returns the pool's cached blocks to the system. Also done by itself when an allocation would fail. */
TSR_API tsr_status_t tsrTrimMemory(tsr_context_t context);

/* Direction of a copy. A "device" side must lie inside one device allocation of the context (tsrAlloc with
 * TSR_ALLOC_DEFAULT, or tsrDeviceRegister). */
typedef enum tsr_memcpy_kind {
  TSR_MEMCPY_HOST_TO_HOST = 0,
  TSR_MEMCPY_HOST_TO_DEVICE = 1,
  TSR_MEMCPY_DEVICE_TO_HOST = 2,
  TSR_MEMCPY_DEVICE_TO_DEVICE = 3,
  TSR_MEMCPY_DEFAULT = 4  /* infer from the pointers; no side must be device memory */
} tsr_memcpy_kind_t;

/* Copies `bytes` (ranges may overlap) and returns when done. NULL pointers are refused unless `bytes` is 0.
 * A side that starts in a known allocation and runs past its end, whatever the kind, returns
 * TSR_ERROR_MEMORY_FAULT; in debug mode so does a side inside freed memory. Asynchronous copies are
 * tsrMemcpyAsync (<tessera/execution.h>). */
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

/* Limits of the CPU backend: shared memory per block (static + dynamic) and threads per block. Query them
 * with tsrGetLimit (<tessera/device.h>) to stay backend-neutral. */
#define TSR_CPU_MAX_SMEM_BYTES (64u * 1024u)
#define TSR_CPU_MAX_BLOCK_THREADS 1024u

/* Launches a kernel over a grid of blocks on `stream` (NULL: the synchronous default stream). `args` holds
 * `nargs` pointers, one per argument of the kernel, each pointing to the argument's value
 * (docs/image-format.md, "Launch arguments"); `args` may be NULL only when the kernel takes no arguments.
 * The values are read before tsrLaunch returns, so they may change afterwards even for a queued launch; the
 * buffers they point to must stay valid until the launch has run.
 *
 * Everything is validated before anything runs or is queued; a refused launch returns
 * TSR_ERROR_INVALID_VALUE with a message: nargs != the kernel's argument count, a NULL slot, a NULL tensor
 * buffer, a negative dimension, a grid or block dimension of 0, a block other than the one the kernel was
 * compiled for (when its metadata fixes one), more threads per block or shared memory than the backend's
 * limits, or a stream of another context. Kernels without the SIMT flag return TSR_ERROR_UNSUPPORTED. In
 * every mode a tensor that starts in a known allocation (tsrAlloc, tsrHostRegister, tsrDeviceRegister) but
 * whose extents (the dimension arguments × the dtype size) run past its end returns TSR_ERROR_MEMORY_FAULT,
 * naming the kernel and the tensor; in debug mode so does a tensor in freed memory. Memory the context does not know is not checked.
 *
 * On the NULL stream the launch has finished when tsrLaunch returns, and a fault caught while it ran (debug
 * mode) is its status; on the CUDA backend the context's watchdog (wait_timeout_ms) bounds that wait:
 * TSR_ERROR_TIMEOUT, the kernel left running (docs/c-api.md, "Timeouts"). On a stream it is queued; faults are
 * reported by tsrStreamSynchronize/tsrStreamQuery.
 * CPU backend: blocks run in any order on the context's worker threads, and on the launching thread too when
 * its stack has at least 4 MiB and the launch has no affinity hint; launches on different streams, or from
 * different threads, may run at the same time. */
TSR_API tsr_status_t tsrLaunch(tsr_kernel_t kernel, tsr_stream_t stream, tsr_launch_t launch, void** args,
                               size_t nargs);

/* The launch descriptor of the ABI draft: tsrLaunch's shape plus the tile shape, warp count, stream,
 * scheduling hints and telemetry counts, in one struct. Fill it with tsrLaunchDescInitialize first. */
typedef struct tsr_launch_desc {
  uint32_t grid[3];     /* blocks per axis, each >= 1 (default 1, 1, 1) */
  uint32_t block[3];    /* threads per block; all 0: (warps × warp size, 1, 1), or the kernel's compiled block */
  uint32_t warps;       /* warps per block; 0: from `block`. With `block` given, must match its thread count */
  uint32_t tile[3];     /* tile shape (BM, BN, BK); 0 = not checked, else must equal the kernel's tile.M/N/K */
  uint32_t smem_bytes;  /* dynamic shared memory per block */
  tsr_stream_t stream;  /* NULL: the synchronous default stream */
  int32_t priority;     /* scheduling hint: higher goes first among competing work; 0: the stream's */
  uint64_t affinity;    /* scheduling hint: bit i allows CPU worker i; 0: the stream's (or any) */
  uint32_t phase;       /* trace phase of the launch's range (tsr_trace_phase_t); default TSR_TRACE_MMA */
  double flops;         /* floating-point operations of the launch, for the metrics log; 0 = unknown */
  double bytes;         /* bytes it moves, for the metrics log; 0 = unknown */
  void** args;          /* as for tsrLaunch */
  size_t nargs;
} tsr_launch_desc_t;

/* grid (1, 1, 1), phase TSR_TRACE_MMA, everything else 0 or NULL. */
TSR_API tsr_status_t tsrLaunchDescInitialize(tsr_launch_desc_t* desc);

/* Launches as tsrLaunch does, from a descriptor. Hints are advisory: priority orders the work the CPU
 * workers pick next; affinity restricts which workers run the blocks (ignored when it names no worker). */
TSR_API tsr_status_t tsrLaunchTile(tsr_kernel_t kernel, const tsr_launch_desc_t* desc);

/* ---------------------------------------------------------------------------------------------------------
 * Functions: whole compiled programs (docs/c-api.md, "Functions")
 * ------------------------------------------------------------------------------------------------------- */

/* A function is an `@function` of the image: its launch plan (the `.tessera.plan` section), run by
 * tsrFunctionCall. It lives as long as its module and needs no release. */
typedef struct tsr_function* tsr_function_t;

/* Looks a function up by name (not NULL). TSR_ERROR_NOT_FOUND when the module has no function of that name;
 * the message names it and lists the module's functions. tsrLoadModule has already read and checked the
 * plans: a module whose plan section is malformed does not load (TSR_ERROR_BAD_IMAGE). A module whose image
 * records another plan version (docs/image-format.md, "Versions") loads for its kernels and has no functions:
 * this returns TSR_ERROR_BAD_IMAGE naming both versions. */
TSR_API tsr_status_t tsrModuleGetFunction(tsr_module_t module, const char* name, tsr_function_t* out_function);

/* Number of functions of the module, and the name of function `index` (0 <= index < count; the string lives
 * as long as the module). */
TSR_API tsr_status_t tsrModuleGetFunctionCount(tsr_module_t module, size_t* out_count);
TSR_API tsr_status_t tsrModuleGetFunctionName(tsr_module_t module, size_t index, const char** out_name);

/* One tensor of a function's signature. Strings and arrays live as long as the module. */
typedef struct tsr_tensor_spec {
  const char* name;        /* the parameter's name; for a result, "result0", "result1", ... */
  const char* dtype_name;  /* as the plan stores it: "f32", "bf16", "i64", ... */
  DLDataType dtype;        /* the DLTensor dtype a call takes for it (bf16: kDLBfloat 16; fp8: kDLUInt 8) */
  uint32_t rank;
  const int64_t* extents;  /* [rank]: >= 0 a fixed extent; -1 an extent given by `dims` */
  const char* const* dims; /* [rank]: each extent as the plan writes it: "256", "T", "ceil(T/2)" */
} tsr_tensor_spec_t;

/* A function's signature: its inputs in parameter order and its outputs in result order. */
typedef struct tsr_function_signature {
  const char* name;
  size_t input_count, output_count;
  const tsr_tensor_spec_t* inputs;   /* [input_count] */
  const tsr_tensor_spec_t* outputs;  /* [output_count] */
} tsr_function_signature_t;

/* Fills `out_signature`; its arrays and strings live as long as the module. */
TSR_API tsr_status_t tsrFunctionGetSignature(tsr_function_t function, tsr_function_signature_t* out_signature);

/* Runs a function: its plan's kernels, in order, on `stream` (NULL: the synchronous default stream).
 * `inputs` holds `n_in` pointers to tensors, one per parameter; `outputs` `n_out`, one per result, whose memory the
 * caller provides and the call fills. Each has exactly the dtype (tsr_tensor_spec_t.dtype) and rank of its
 * signature entry; extents named by a symbol ("T") are bound by the first input that has them and must agree
 * everywhere else, the outputs' included. Tensors live in memory the context's kernels address, on the DLPack
 * device type of its backend and device_id 0 (the device a context drives): cpu kDLCPU, kDLCUDAHost or
 * kDLROCMHost; cuda kDLCUDA or kDLCUDAManaged; hip kDLROCM; level_zero kDLOneAPI; opencl kDLOpenCL.
 * byte_offset is added to data. Strides may be NULL or compact row-major (used in place) or any others
 * (transposed, sliced, negative; zero for inputs: a broadcast); no kernel takes strides in this version, so
 * every non-compact tensor is copied: an input gathered into a compact intermediate before the first step, a
 * result scattered into an output (or an input a tile program writes) after the last, by the host (on device
 * backends through host staging copies of the span the tensor reaches, written back whole). A call with a
 * strided tensor on a stream therefore waits for the stream first, and is refused on a capturing stream.
 * Compact inputs are used in place, not copied:
 * a kernel the plan lets write an input writes it (a tile program's outputs are also written into the inputs
 * passed for them, as tessera.executor does). Launches go to `stream` through tsrLaunch; results are copied
 * into the outputs with the runtime's device-to-device copy on the same stream (host-to-host on the CPU),
 * ordered after the launches. Intermediates come from the context's pool (tsrAlloc). On the NULL stream they
 * are freed before the call returns. On a stream the call does not wait (unless a tensor is strided): they
 * are released in stream order, once the work queued on the stream up to the call's last operation has
 * finished (a marker taken then: an event on device queues), and back in the pool when a later call, a
 * tsrAlloc that needs a new block, tsrStreamSynchronize, tsrSynchronize or tsrTrimMemory finds that marker
 * passed, or when the stream is destroyed; a later call on the same stream may reuse one before that, as its
 * work runs after the work that used it (a stream runs in order). Failures of the queued work are then
 * reported by the stream's next wait, as for tsrLaunch; where no marker can be had (out of memory, the
 * device refusing an event) the call waits for the stream and returns its error. On a stream capturing a graph (tsrStreamBeginCapture) the call's launches and copies are
 * recorded, not run, and nothing waits: one tsrGraphLaunch of an instance replays the whole call on the
 * tensors' memory as captured (write new inputs into the same buffers between replays); the intermediates
 * then belong to the graph and are freed (tsrFree) when the graph and every executable graph instantiated
 * from it are destroyed, which must wait until their replays are done.
 *
 * Everything about the arguments is checked before any kernel runs. Errors, each with a message naming the
 * function and the argument: TSR_ERROR_INVALID_HANDLE (function, or a stream of no context);
 * TSR_ERROR_INVALID_VALUE for a NULL `inputs`/`outputs` array with a count above 0, a NULL tensor or data
 * pointer, n_in or n_out other than the signature's, a wrong rank, dtype (lanes other than 1 included) or
 * extent, an extent bound twice differently, an output (or an input a tile program writes) whose
 * elements share memory (zero or interleaved strides), a DLPack device type other than the backend's or a
 * device_id other than 0 (the message names both), extents and strides spanning more than int64 elements, a
 * stream of another context, an input that a tile program also writes a result into whose number of elements
 * differs from that result's (a broadcasting C of C += A @ B), and at run time an extent expression that fails (a division by zero, a
 * result outside int64), a value the plan views with another number of elements, an extent not a multiple
 * of what a kernel needs (naming the kernel and the reason), or a scalar out of its type's range;
 * TSR_ERROR_NOT_FOUND when a step's kernel has no code this runtime can run, or when a call step calls a
 * function the module does not define (an import of an image not linked: the message names the caller, the step,
 * the import and says to link it with tessera-link); TSR_ERROR_UNSUPPORTED for call steps nested more than 64
 * deep (a cycle of calls in a hand-made or linked plan), and for a strided tensor on a capturing stream or of
 * rank above 8;
 * TSR_ERROR_MEMORY_FAULT for a tensor whose data lies in an allocation the context knows (tsrAlloc,
 * tsrHostRegister, tsrDeviceRegister) that does not hold every element its shape and strides reach (memory the context does
 * not know cannot be checked);
 * TSR_ERROR_OUT_OF_MEMORY; and whatever tsrLaunch returns for a step, with the step named. After a failure
 * at run time, outputs may be partly written. Thread safety: concurrent calls of one function are allowed,
 * on one stream or several (each has its own intermediates; the context's list of released ones is locked).
 * A capture begun on the stream while a call on it runs is the caller's race. */
TSR_API tsr_status_t tsrFunctionCall(tsr_function_t function, tsr_stream_t stream, const DLTensor* const* inputs,
                                     size_t n_in, const DLTensor* const* outputs, size_t n_out);

/* What a call may be given besides its tensors. Fill it with tsrFunctionCallOptionsInitialize first. */
typedef struct tsr_function_call_options {
  /* The communicator (a tsr_comm_t, <tessera/comm.h>) the plan's collective steps run on (NULL: none; a
   * collective step then fails). Its rank r is the mesh's device r, coordinates row-major over the mesh's
   * shape, and its size must be the mesh's device count; a step over one axis of a larger mesh runs on a
   * communicator split from it (tsrCommSplit) for the call. */
  struct tsr_comm* comm;
} tsr_function_call_options_t;

/* Sets the defaults: no communicator. TSR_ERROR_INVALID_VALUE for NULL. Thread safety: any thread. */
TSR_API tsr_status_t tsrFunctionCallOptionsInitialize(tsr_function_call_options_t* options);

/* tsrFunctionCall with `options` (NULL: the defaults), through which the call's collective steps get their
 * communicator (docs/c-api.md, "Collective steps"). Every rank of the communicator calls the function with
 * its own tensors (its shards of sharded parameters), in the same order as the others. A collective step
 * runs as the communicator's operation on the call's stream; a reduction in tree order (the plan's
 * `deterministic`, or algo tree / binary_tree) gathers every rank's tensor and combines them on the host in the
 * interpreter's order, bit-identical to tessera.interpret, whatever the communicator's own flags. Besides tsrFunctionCall's
 * statuses: TSR_ERROR_INVALID_VALUE for a collective step with no communicator, or one whose size is not
 * the mesh's device count (the message names function, step, collective and mesh axis); the communicator's
 * statuses (comm.h: TSR_ERROR_TIMEOUT, TSR_ERROR_LAUNCH_FAILED for a peer error, ...) with the step named;
 * TSR_ERROR_UNSUPPORTED for a deterministic reduction of a dtype the host cannot combine (fp8, tf32, f16) or
 * a call with collectives over more than 8 distinct mesh axes. Thread safety: as tsrFunctionCall; calls
 * sharing a communicator must not run at once (comm.h). */
TSR_API tsr_status_t tsrFunctionCallWithOptions(tsr_function_t function, tsr_stream_t stream,
                                                const DLTensor* const* inputs, size_t n_in,
                                                const DLTensor* const* outputs, size_t n_out,
                                                const tsr_function_call_options_t* options);

/* The extents of the results a call with these inputs produces, for sizing its outputs: `out_dims` receives
 * result 0's extents, then result 1's, ...; `n_dims` must equal the sum of the results' ranks (the signature's
 * outputs[i].rank). The inputs are checked exactly as tsrFunctionCall checks them, with the same statuses and
 * messages, except that their data may be NULL (nothing is read, nothing runs). Errors:
 * TSR_ERROR_INVALID_HANDLE (function); TSR_ERROR_INVALID_VALUE for an `n_dims` other than the results' total
 * rank (the message gives both), a NULL `out_dims` with `n_dims` above 0, whatever tsrFunctionCall says of
 * the inputs, and a result extent whose expression fails or is below 0; TSR_ERROR_MEMORY_FAULT for input data
 * in a known allocation shorter than its shape; TSR_ERROR_OUT_OF_MEMORY. On failure `out_dims` may be partly
 * written. Thread safety: any thread. */
TSR_API tsr_status_t tsrFunctionGetResultShapes(tsr_function_t function, const DLTensor* const* inputs, size_t n_in,
                                                int64_t* out_dims, size_t n_dims);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#include "tessera/device.h"
#include "tessera/execution.h"
#include "tessera/comm.h"
#include "tessera/telemetry.h"
#include "tessera/abi_draft.h"
#include "tessera/operator.h"

#endif  /* TESSERA_TESSERA_H_ */

/*
 * abi_draft.h — the names of the Tessera ABI runtime draft (spec/abi-runtime-spec.md), as aliases of the
 * tsr* API. Included by tessera.h; do not include it alone.
 *
 * The draft's handles are the same objects as the tsr* handles, and its status codes the same numbers, so
 * the two APIs mix freely: a context made by tessera_context_create loads modules with tsrLoadModule, and a
 * kernel from tsrGetKernel is a tessera_operator_handle. Every function returns a tsr_status_t value as int,
 * as the draft does. The one object of the draft without a tsr* twin is the memory handle: a
 * reference-counted owner of one tsrAlloc allocation.
 */
#ifndef TESSERA_ABI_DRAFT_H_
#define TESSERA_ABI_DRAFT_H_

#ifdef __cplusplus
extern "C" {
#endif

/* The draft's error codes (Part VI) = tsr_status_t values; after the draft's five, the appended ones. */
#define TESSERA_SUCCESS TSR_SUCCESS
#define TESSERA_ERROR_INIT_FAIL TSR_ERROR_INIT_FAIL
#define TESSERA_ERROR_INVALID_HANDLE TSR_ERROR_INVALID_HANDLE
#define TESSERA_ERROR_OUT_OF_MEMORY TSR_ERROR_OUT_OF_MEMORY
#define TESSERA_ERROR_UNSUPPORTED_FEATURE TSR_ERROR_UNSUPPORTED
#define TESSERA_ERROR_INVALID_VALUE TSR_ERROR_INVALID_VALUE
#define TESSERA_ERROR_TIMEOUT TSR_ERROR_TIMEOUT
#define TESSERA_ERROR_BAD_IMAGE TSR_ERROR_BAD_IMAGE
#define TESSERA_ERROR_ABI_MISMATCH TSR_ERROR_ABI_MISMATCH
#define TESSERA_ERROR_NOT_FOUND TSR_ERROR_NOT_FOUND
#define TESSERA_ERROR_LAUNCH_FAILED TSR_ERROR_LAUNCH_FAILED
#define TESSERA_ERROR_NOT_READY TSR_ERROR_NOT_READY
#define TESSERA_ERROR_MEMORY_FAULT TSR_ERROR_MEMORY_FAULT

/* The draft's handles. */
typedef struct tsr_context* tessera_context_handle;
typedef struct tsr_kernel* tessera_operator_handle;  /* an operator is a launchable kernel */
typedef struct tsr_stream* tessera_stream_handle;
typedef struct tsr_event* tessera_event_handle;
typedef struct tsr_memory* tessera_memory_handle;
typedef tsr_launch_desc_t tessera_launch_desc;       /* fill with tsrLaunchDescInitialize */

/* Contexts: tsrCreateContext, tsrDestroyContext, tsrRetainContext, tsrReleaseContext. */
TSR_API int tessera_context_create(tessera_context_handle* out);
TSR_API int tessera_context_destroy(tessera_context_handle ctx);
TSR_API int tessera_context_retain(tessera_context_handle ctx);
TSR_API int tessera_context_release(tessera_context_handle ctx);

/* Memory: a handle owning `bytes` of device memory (tsrAlloc, TSR_ALLOC_DEFAULT), with one reference.
 * tessera_memory_free drops a reference; the last one frees the memory. The context owns the handle:
 * destroying it frees the memory too. */
TSR_API int tessera_memory_alloc(tessera_context_handle ctx, size_t bytes, tessera_memory_handle* out);
TSR_API int tessera_memory_free(tessera_memory_handle mem);
TSR_API int tessera_memory_retain(tessera_memory_handle mem);
/* The device address and size of the memory (extensions of the draft: a handle is useless without them). */
TSR_API int tessera_memory_pointer(tessera_memory_handle mem, void** out_ptr);
TSR_API int tessera_memory_size(tessera_memory_handle mem, size_t* out_bytes);

/* Execution: tsrLaunchTile, tsrEventRecord, tsrStreamWaitEvent. */
TSR_API int tessera_launch_tile(tessera_operator_handle op, const tessera_launch_desc* desc);
TSR_API int tessera_event_record(tessera_event_handle event, tessera_stream_handle stream);
TSR_API int tessera_stream_wait_event(tessera_stream_handle stream, tessera_event_handle event);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TESSERA_ABI_DRAFT_H_ */

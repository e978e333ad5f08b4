/*
 * abi_draft.h — names from the Tessera ABI runtime draft (spec/abi-runtime-spec.md), as aliases of the
 * tsr* API. Included by tessera.h; do not include it alone.
 *
 * The draft's handles are the same objects as the tsr* handles, and its status codes the same numbers, so
 * the two APIs mix freely: a context made by tessera_context_create can load modules with tsrLoadModule.
 * Only the context entry points exist so far; the rest of the draft (memory handles, launch descriptors,
 * events) follows with the matching tsr* features.
 */
#ifndef TESSERA_ABI_DRAFT_H_
#define TESSERA_ABI_DRAFT_H_

#ifdef __cplusplus
extern "C" {
#endif

/* The draft's error codes (Part VI) = tsr_status_t values. */
#define TESSERA_SUCCESS TSR_SUCCESS
#define TESSERA_ERROR_INIT_FAIL TSR_ERROR_INIT_FAIL
#define TESSERA_ERROR_INVALID_HANDLE TSR_ERROR_INVALID_HANDLE
#define TESSERA_ERROR_OUT_OF_MEMORY TSR_ERROR_OUT_OF_MEMORY
#define TESSERA_ERROR_UNSUPPORTED_FEATURE TSR_ERROR_UNSUPPORTED

/* The draft's context handle is a tsr_context_t. */
typedef struct tsr_context* tessera_context_handle;

/* Same as tsrCreateContext / tsrDestroyContext; return a tsr_status_t value as int, as the draft does. */
TSR_API int tessera_context_create(tessera_context_handle* out);
TSR_API int tessera_context_destroy(tessera_context_handle ctx);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TESSERA_ABI_DRAFT_H_ */

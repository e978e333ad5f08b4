/* object.h — the life of reference-counted handles: registration with their context, retain and release
 * from the API, internal references (a queued event record keeps its event), and destruction by type. */
#ifndef TESSERA_SRC_OBJECT_H_
#define TESSERA_SRC_OBJECT_H_

#include "handles.h"

struct tsr_context;

/* Gives `object` one reference, registers it and links it into the context's list. TSR_ERROR_INVALID_HANDLE
 * (with `function`'s name) when the context is not live — it may have been destroyed meanwhile. */
tsr_status_t tsr_object_publish(struct tsr_context* context, tsr_object_t* object, uint32_t magic,
                                const char* function);

/* Retain and release, for the API and for internal users holding a handle across a call: refuse a handle
 * that is not a live `what` ("stream") of type `magic` (checking and counting in one step, so that a
 * concurrent last release cannot free it in between). The last release retires the object and destroys it. */
tsr_status_t tsr_object_retain(void* handle, uint32_t magic, const char* function, const char* what);
tsr_status_t tsr_object_release(void* handle, uint32_t magic, const char* function, const char* what);

/* Internal references to an object known to be alive (the caller holds a reference, or just checked it under
 * the registry lock). tsr_object_unref of an object already retired by its context's destruction does
 * nothing: the context destroys it. */
void tsr_object_ref(tsr_object_t* object);
void tsr_object_unref(tsr_object_t* object);

/* Retires an object (registry lock held): out of the registry and its context's list, magic cleared. */
void tsr_object_retire_locked(tsr_object_t* object);

/* Destroys a retired object by its type. */
void tsr_object_destroy(tsr_object_t* object);

#endif  /* TESSERA_SRC_OBJECT_H_ */

/* abi_draft.c — the ABI draft's context entry points over the tsr* implementation (tessera/abi_draft.h). */
#include "tessera/tessera.h"

int tessera_context_create(tessera_context_handle* out) { return tsrCreateContext(out); }

int tessera_context_destroy(tessera_context_handle ctx) { return tsrDestroyContext(ctx); }

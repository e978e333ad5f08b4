/* cpu_code.h — loading a `.tessera.code.cpu` shared object from memory and finding kernel entries in it. */
#ifndef TESSERA_SRC_CPU_CODE_H_
#define TESSERA_SRC_CPU_CODE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/cpu_kernel.h"
#include "tessera/tessera.h"

typedef struct tsr_cpu_code tsr_cpu_code_t;

/* Checks that `bytes` is a shared object for this host (cpu_elf.h), then loads a private copy of it
 * (RTLD_LOCAL). `section` names the image section, for messages. TSR_ERROR_BAD_IMAGE or TSR_ERROR_INIT_FAIL. */
tsr_status_t tsr_cpu_code_load(const uint8_t* bytes, size_t size, const char* section, tsr_cpu_code_t** out);

/* Resolves an exported entry; false when the object does not export `symbol`. */
bool tsr_cpu_code_entry(tsr_cpu_code_t* code, const char* symbol, tsr_cpu_entry_t* out);

void tsr_cpu_code_unload(tsr_cpu_code_t* code);

#endif  /* TESSERA_SRC_CPU_CODE_H_ */

/* cpu_elf.h — the checks a `.tessera.code.cpu` section passes before the system's dynamic loader sees it
 * (which trusts its input): an ELF64 little-endian shared object for this host with a sane program header
 * table. Kept apart from the loading itself so that the fuzzers can run it without dlopen(). */
#ifndef TESSERA_SRC_CPU_ELF_H_
#define TESSERA_SRC_CPU_ELF_H_

#include <stddef.h>
#include <stdint.h>

#include "tessera/tessera.h"

/* The `arch` string of kernels this host runs ("x86_64", "aarch64"); NULL on other hosts. */
const char* tsr_cpu_host_arch(void);

/* TSR_ERROR_BAD_IMAGE with a message naming `section` when `bytes` is not a shared object for this host. */
tsr_status_t tsr_cpu_check_shared_object(const uint8_t* bytes, size_t size, const char* section);

#endif  /* TESSERA_SRC_CPU_ELF_H_ */

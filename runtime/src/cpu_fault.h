/* cpu_fault.h — running a CPU kernel block so that a memory fault in it (SIGSEGV, SIGBUS) becomes a report
 * instead of the end of the process: debug mode's guard pages and revoked frees fault, and the launch returns
 * TSR_ERROR_MEMORY_FAULT. */
#ifndef TESSERA_SRC_CPU_FAULT_H_
#define TESSERA_SRC_CPU_FAULT_H_

#include <stdbool.h>
#include <stdint.h>

#include "tessera/cpu_kernel.h"
#include "tessera/tessera.h"

/* Installs the process's fault handlers (once; later calls do nothing). Faults outside guarded blocks go to
 * the handlers that were installed before, or to the default action. TSR_ERROR_INIT_FAIL if sigaction fails. */
tsr_status_t tsr_cpu_fault_install(void);

/* Calls entry(args, ctx). True when it returned; false when it faulted, with the faulting address and signal.
 * The block is abandoned where it faulted (kernels hold no locks and touch no global state, so nothing is
 * left inconsistent but the memory it wrote). tsr_cpu_fault_install must have succeeded. */
bool tsr_cpu_run_guarded(tsr_cpu_entry_t entry, void** args, const tsr_cpu_block_ctx_t* ctx, uintptr_t* address,
                         int* signal);

#endif  /* TESSERA_SRC_CPU_FAULT_H_ */

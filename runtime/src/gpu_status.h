/* gpu_status.h — the status of an error number in the numbering the CUDA driver API set and HIP took over
 * (2 out of memory, 100 no device, 200s bad code, 500 not found, 7xx failed launches), shared by the CUDA
 * and HIP backends. */
#ifndef TESSERA_SRC_GPU_STATUS_H_
#define TESSERA_SRC_GPU_STATUS_H_

#include <stdbool.h>

#include "tessera/tessera.h"

/* `otherwise` when `code` has no closer status. */
tsr_status_t tsr_gpu_status(int code, tsr_status_t otherwise);

/* Whether `code` is a fault of a kernel (illegal or misaligned address, trap, illegal instruction, …), after
 * which the device context cannot be used again. */
bool tsr_gpu_sticky(int code);

#endif  /* TESSERA_SRC_GPU_STATUS_H_ */

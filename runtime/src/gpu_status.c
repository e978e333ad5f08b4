/* gpu_status.c — CUDA/HIP error numbers as statuses (gpu_status.h). */
#include "gpu_status.h"

bool tsr_gpu_sticky(int code) { return code == 700 || code == 710 || (code >= 714 && code <= 719); }

tsr_status_t tsr_gpu_status(int code, tsr_status_t otherwise) {
  switch (code) {
    case 1: return TSR_ERROR_INVALID_VALUE;
    case 2: return TSR_ERROR_OUT_OF_MEMORY;
    case 3:     /* not initialized */
    case 35:    /* the runtime is newer than the driver */
    case 100:   /* no device */
    case 101: return TSR_ERROR_INIT_FAIL;  /* invalid device */
    case 200:   /* invalid image */
    case 209:   /* no binary for this GPU */
    case 218:   /* CUDA: invalid PTX; HIP: invalid kernel file */
    case 221:   /* CUDA: JIT compiler not found */
    case 222:   /* CUDA: unsupported PTX version */
    case 302:   /* shared object symbol not found */
    case 303: return TSR_ERROR_BAD_IMAGE;  /* shared object init failed (HIP: the code object did not load) */
    case 500: return TSR_ERROR_NOT_FOUND;
    default:
      /* 7xx: a launch failed; a sticky one also fails every later call. Not TSR_ERROR_MEMORY_FAULT even for an
       * illegal address: that status means a fault debug mode caught, with its details (backend.h). */
      return code >= 700 && code < 800 ? TSR_ERROR_LAUNCH_FAILED : otherwise;
  }
}

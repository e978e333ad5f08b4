/* gpu_fault.h — what every GPU backend shares of the fault records of code compiled with bounds checks
 * (passes/gpu_bounds_checks.py): the globals' names and sizes, and the site table's reading.
 *
 * `__tessera_fault` is u32[4], zero until a check fails: [0] 1 + the failed check's site, [1..3] its block.
 * `__tessera_fault_sites` holds two NUL-terminated strings per site: the kernel's name and the report
 * ("tensor 'Out' accessed outside its extents at file.py:12"). A module without the record was compiled
 * without checks. */
#ifndef TESSERA_SRC_GPU_FAULT_H_
#define TESSERA_SRC_GPU_FAULT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

#define TSR_GPU_FAULT_RECORD "__tessera_fault"
#define TSR_GPU_FAULT_SITES "__tessera_fault_sites"

enum { TSR_GPU_FAULT_RECORD_BYTES = 16, TSR_GPU_FAULT_MAX_SITES_BYTES = 1 << 24 };

/* Whether a module's globals have the sizes the compiler writes (record 16 bytes, sites 1 byte to 16 MiB). */
bool tsr_gpu_fault_sizes_ok(size_t record_bytes, size_t sites_bytes);

/* Site `site` of the table `table` (`bytes` long, read from the device): its kernel and report, NUL-terminated
 * and truncated to the buffers; when the table does not name it, "?" and a report saying so. Returns whether
 * the table named it. */
bool tsr_gpu_fault_site(const char* table, size_t bytes, uint32_t site, char* kernel, size_t kernel_size,
                        char* report, size_t report_size);

/* SPIR-V (OpenCL, Level Zero; the "flat" kernel abi): every kernel of a checked module takes the record as a
 * hidden trailing argument, a buffer of TSR_GPU_FAULT_SPIRV_BYTES the runtime zeroes before the launch: the
 * record above, then the claim word the kernel's atomic OR sets. The site table is in the module as OpStrings
 * (docs/image-format.md): TSR_GPU_FAULT_SITES, then each site's kernel and report. */
enum { TSR_GPU_FAULT_SPIRV_BYTES = 20 };

/* The site table of the SPIR-V `spv` (`size` bytes) into *table (malloc'ed, *bytes long, NULL and 0 when it
 * has no site), if the module was compiled with checks; false for unchecked SPIR-V (or out of memory,
 * *table then NULL and *bytes 1). */
bool tsr_gpu_fault_spirv_sites(const uint8_t* spv, size_t size, char** table, size_t* bytes);

/* The fault sites of a SPIR-V section about to load (tsr_gpu_fault_spirv_sites: *checked, and *sites owned by
 * the caller), refusing it in debug mode (TESSERA_DEBUG) when it was compiled without checks
 * (TSR_ERROR_UNSUPPORTED, saying how to recompile). TSR_ERROR_OUT_OF_MEMORY when the table cannot be copied. */
tsr_status_t tsr_gpu_fault_spirv_load(const uint8_t* spv, size_t size, const char* section, bool debug,
                                      bool* checked, char** sites, size_t* sites_bytes);

/* A launch's failed check as its result: `fault` (block, report) filled for launch.c, which names the launched
 * kernel; `own` says whether the recorded failure is that kernel's, else the report names `kernel`, which ran
 * on another stream. Returns TSR_ERROR_MEMORY_FAULT. */
tsr_status_t tsr_gpu_fault_of_launch(bool own, const char* kernel, const char* report, const uint32_t block[3],
                                     tsr_fault_t* fault);

/* A SPIR-V launch's own record, read back after it (`record`: 1 + the failed site, then the block), against
 * its module's site table: TSR_SUCCESS where no check failed, else as tsr_gpu_fault_of_launch. */
tsr_status_t tsr_gpu_fault_of_record(const uint32_t record[4], const char* sites, size_t sites_bytes,
                                     tsr_fault_t* fault);

#endif  /* TESSERA_SRC_GPU_FAULT_H_ */

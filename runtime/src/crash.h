/* crash.h — crash capture (<tessera/telemetry.h>): when $TESSERA_CRASH_DIR is set as a context is created,
 * a failed launch on it leaves a directory there with everything needed to replay it (docs/runtime.md,
 * "Crash capture"):
 *
 *   image.tessera   the whole image the kernel came from
 *   ops.mlirbc      its .tessera.ops section: the IR snapshot (absent when the image has none)
 *   kernel.json     the kernel's metadata
 *   launch.json     the launch: shape, hints, status and message, every argument, the memory regions
 *   region<N>.bin   the bytes of each region the tensor arguments point into, as they were before the launch
 *   log.txt         versions, the failure, and the runtime's recent failure messages
 *
 * Tensors are captured before a launch runs (only on such contexts), so that a launch that
 * faults half-way is replayed from its inputs. A region is the whole allocation a tensor lies in when the
 * context knows it, else the tensor's extent; at most $TESSERA_CRASH_MAX_BYTES (default 256 MiB) per launch. */
#ifndef TESSERA_SRC_CRASH_H_
#define TESSERA_SRC_CRASH_H_

#include <stdbool.h>

#include "launch.h"

typedef struct tsr_crash_snapshot tsr_crash_snapshot_t;

/* A copy of $TESSERA_CRASH_DIR (for a context to keep, and free), or NULL when it is unset or empty. */
char* tsr_crash_dir_from_env(void);

/* Copies the memory the launch's tensors point into; NULL when nothing could be taken (out of memory). */
tsr_crash_snapshot_t* tsr_crash_snapshot(const tsr_launch_record_t* record);

/* Writes a capture directory for a failed launch, and a line naming it to stderr. `snapshot` NULL: the memory
 * is read now (a launch refused before it ran); regions the snapshot lacks are added to it. Never fails the
 * caller: problems go to stderr. The record may be one that validation refused, so every argument is read
 * defensively. */
void tsr_crash_write(const tsr_launch_record_t* record, tsr_crash_snapshot_t* snapshot, tsr_status_t status,
                     const char* message);

void tsr_crash_snapshot_free(tsr_crash_snapshot_t* snapshot);

#endif  /* TESSERA_SRC_CRASH_H_ */

/* event.h — events: a count of records issued and completed, and the time of the newest completion. A
 * record is issued when it is given to a stream (its sequence number) and completed when the stream reaches
 * it; queries and waits concern the newest record issued at the time they are asked.
 *
 * On a backend with device queues (backend.h) an event is the device's: records, waits, queries and times
 * go to it, and only `issued` is kept here (whether the event was ever recorded). */
#ifndef TESSERA_SRC_EVENT_H_
#define TESSERA_SRC_EVENT_H_

#include <pthread.h>
#include <stdint.h>

#include "handles.h"
#include "wait.h"

struct tsr_event {
  tsr_object_t obj;
  pthread_mutex_t lock;
  pthread_cond_t completed_cond;
  uint64_t issued;     /* records given to streams so far */
  uint64_t completed;  /* the newest record completed (records of several streams may complete out of order) */
  double time;         /* monotonic seconds when `completed` completed */
  void* device;        /* the backend's event, or NULL */
};

uint64_t tsr_event_issue(struct tsr_event* event);   /* a new record's sequence number */
uint64_t tsr_event_latest(struct tsr_event* event);  /* the newest issued, 0 if never recorded */
void tsr_event_complete(struct tsr_event* event, uint64_t seq);
void tsr_event_wait(struct tsr_event* event, uint64_t seq);  /* until record `seq` or a newer one completed */
/* The same within `limit`; false when the deadline passed first. */
bool tsr_event_wait_within(struct tsr_event* event, uint64_t seq, const tsr_wait_limit_t* limit);

/* A live event of `context` (a reference taken), or an error naming `function`. */
tsr_status_t tsr_event_acquire(struct tsr_event* event, struct tsr_context* context, const char* function);

void tsr_event_free(struct tsr_event* event);

#endif  /* TESSERA_SRC_EVENT_H_ */

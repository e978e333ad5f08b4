/* fake_nvtx.c — a stand-in for libnvToolsExt.so.1 with the three entry points libtessera uses; it writes
 * what it is given to $FAKE_NVTX_LOG, so that a test can see the ranges (TESSERA_NVTX_LIBRARY points at it).
 * Build: cc -shared -fPIC fake_nvtx.c -o libfake_nvtx.so */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct attributes {  /* nvtxEventAttributes_v2 */
  uint16_t version, size;
  uint32_t category;
  int32_t color_type;
  uint32_t color;
  int32_t payload_type, reserved0;
  uint64_t payload;
  int32_t message_type;
  const char* message;
} attributes_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void log_line(const char* format, uint32_t number, const char* text) {
  const char* path = getenv("FAKE_NVTX_LOG");
  if (!path) return;
  pthread_mutex_lock(&lock);
  FILE* f = fopen(path, "a");
  if (f) {
    fprintf(f, format, number, text);
    fclose(f);
  }
  pthread_mutex_unlock(&lock);
}

int nvtxRangePushEx(const attributes_t* a) {
  log_line("push %u %s\n", a->category, a->message_type == 1 ? a->message : "?");
  return 0;
}

int nvtxRangePop(void) {
  log_line("pop %u%s\n", 0, "");
  return 0;
}

void nvtxNameCategoryA(uint32_t category, const char* name) { log_line("category %u %s\n", category, name); }

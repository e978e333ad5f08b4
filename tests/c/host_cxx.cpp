// host_cxx.cpp — the headers compile as C++ (extern "C", no C-only constructs) and link from a C++ host.
#include <tessera/tessera.h>

int main() {
  tsr_context_t ctx = nullptr;
  if (tsrCreateContext(&ctx) != TSR_SUCCESS) return 1;
  uint32_t major = 0, minor = 0;
  if (tsrGetAbiVersion(&major, &minor) != TSR_SUCCESS || major != TSR_ABI_MAJOR) return 1;
  return tsrDestroyContext(ctx) == TSR_SUCCESS && tsrDestroyContext(ctx) == TESSERA_ERROR_INVALID_HANDLE ? 0 : 1;
}

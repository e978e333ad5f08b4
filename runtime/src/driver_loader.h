/* driver_loader.h — opening a GPU driver library at run time and resolving its entry points, for the
 * backends that dlopen() their driver (HIP, Level Zero). Each backend keeps its own table of functions; this
 * is the part they share: which file is opened ($TESSERA_<X>_LIBRARY first: a path or a soname, how the tests
 * substitute a mock driver) and the sentences that say why not. */
#ifndef TESSERA_SRC_DRIVER_LOADER_H_
#define TESSERA_SRC_DRIVER_LOADER_H_

#include <stdbool.h>
#include <stddef.h>

typedef struct tsr_driver_library {
  void* handle;
  char name[256];  /* what was opened, for messages */
} tsr_driver_library_t;

/* Opens the library named by the environment variable `env` when it is set and not empty, else the first of
 * `candidates` (NULL-terminated) that opens. False, with `why` saying what `what` (e.g. "the HIP runtime")
 * failed on, when none does. The library is never closed: drivers run threads of their own in it. */
bool tsr_driver_open(tsr_driver_library_t* lib, const char* env, const char* const* candidates, const char* what,
                     char* why, size_t why_size);

/* Resolves `symbol` into the function pointer at `slot`; false, with `why` naming the library, the symbol and
 * `hint`, when the library lacks it. */
bool tsr_driver_resolve(const tsr_driver_library_t* lib, const char* symbol, void* slot, const char* hint, char* why,
                        size_t why_size);

#endif  /* TESSERA_SRC_DRIVER_LOADER_H_ */

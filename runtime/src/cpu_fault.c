/* cpu_fault.c — fault recovery for guarded kernel blocks (cpu_fault.h).
 *
 * A worker arms a thread-local sigjmp_buf around the entry call; the handler, seeing it armed on the faulting
 * thread, records the address and siglongjmp()s back. Everything the handler touches is async-signal-safe:
 * thread-locals of the initial-exec model (no allocation on first access) and siglongjmp. */
#define _DEFAULT_SOURCE /* SA_ONSTACK, siginfo_t.si_addr under _POSIX_C_SOURCE */
#include "cpu_fault.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>

#include "errors.h"

#define TLS __thread __attribute__((tls_model("initial-exec")))

static TLS sigjmp_buf* volatile armed;
static TLS volatile uintptr_t fault_address;
static TLS volatile int fault_signal;

static struct sigaction previous_segv, previous_bus;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int install_error;

static void on_fault(int sig, siginfo_t* info, void* ucontext) {
  sigjmp_buf* env = armed;
  if (env) {
    armed = NULL;
    fault_address = (uintptr_t)info->si_addr;
    fault_signal = sig;
    siglongjmp(*env, 1);
  }
  /* Not ours: hand it to whoever handled it before us. */
  struct sigaction* before = sig == SIGSEGV ? &previous_segv : &previous_bus;
  if ((before->sa_flags & SA_SIGINFO) && before->sa_sigaction) {
    before->sa_sigaction(sig, info, ucontext);
  } else if (before->sa_handler != SIG_DFL && before->sa_handler != SIG_IGN) {
    before->sa_handler(sig);
  } else {
    /* Restore the default and return: the faulting instruction runs again and the default action follows,
     * with the fault's own context in the core dump. */
    sigaction(sig, before, NULL);
  }
}

static void install(void) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGSEGV, &action, &previous_segv) || sigaction(SIGBUS, &action, &previous_bus)) install_error = 1;
}

tsr_status_t tsr_cpu_fault_install(void) {
  pthread_once(&once, install);
  if (install_error) return tsr_fail(TSR_ERROR_INIT_FAIL, "debug mode: cannot install the fault handlers");
  return TSR_SUCCESS;
}

bool tsr_cpu_run_guarded(tsr_cpu_entry_t entry, void** args, const tsr_cpu_block_ctx_t* ctx, uintptr_t* address,
                         int* signal) {
  sigjmp_buf env;
  if (sigsetjmp(env, 1)) {
    *address = fault_address;
    *signal = fault_signal;
    return false;
  }
  armed = &env;
  entry(args, ctx);
  armed = NULL;
  return true;
}

// launch_plan.h — the fast path of tessera.runtime.Kernel.__call__.
//
// A kernel's argument checks are laid out once (LaunchPlan, from the image's argument records, by
// tessera/runtime.py) and applied here, in C++, to numpy arrays, DeviceArrays, PyTorch CUDA tensors and
// Python or numpy scalars, filling the argument slots directly: no bytes object, tuple or dict per call.
// The fast path accepts exactly what the Python launcher (Kernel.pack) accepts and packs the same values. For
// anything else (a wrong argument of any kind, an array type it does not read, a launch shape it does not
// parse) it declines, having changed nothing, and the Python launcher runs and raises its own message: the
// checks' messages are written once, in Python, and a declined call costs only the time it took to decline.
#ifndef TESSERA_PYTHON_LAUNCH_PLAN_H_
#define TESSERA_PYTHON_LAUNCH_PLAN_H_

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "bindings.h"

namespace tsr_py {

struct LaunchPlan;

// The plan of one kernel. `records`: one tuple per argument slot, (kind, numpy dtype or None, pack code,
// scalar kind, bits, dims, read-only), see Kernel._fast_plan in tessera/runtime.py; `refs`: the Python
// objects it recognizes arguments by (DeviceArray, the torch dtype names, numpy's scalar classes).
std::shared_ptr<LaunchPlan> make_launch_plan(const py::sequence& records, bool host_memory, const py::dict& refs);

// A launch's values as the fast path read them.
struct LaunchValues {
  static constexpr size_t kMaxSlots = 64;  // kernels with more arguments take the Python path
  uint64_t slots[kMaxSlots];               // each slot's value, little-endian from its first byte
  void* args[kMaxSlots];
  size_t nargs = 0;
  std::array<uint32_t, 3> grid{}, block{};
  uint32_t smem_bytes = 0;
  double flops = 0, bytes = 0;
};

// Reads a call's arguments and launch shape into `out`; false (and no Python error set) where the Python
// launcher must judge them.
bool read_launch(LaunchPlan& plan, PyObject* args, PyObject* grid, PyObject* block, PyObject* smem_bytes,
                 PyObject* flops, PyObject* bytes, LaunchValues* out);

}  // namespace tsr_py

#endif  // TESSERA_PYTHON_LAUNCH_PLAN_H_

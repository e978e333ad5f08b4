"""Runs Graph IR functions from an image through libtessera's plan executor (tsrFunctionCall, the one executor,
which a C host calls too): this module is its binding.

    prog = tessera.executor.load("model.tessera")
    Y = prog.mlp(X, W1, b1, W2)

On the CPU backend the tensors are numpy arrays, used in place. On a backend with memory of its own (a
context passed to `load`: ``runtime.select_backend("cuda")``, ``_runtime.Context("opencl")`` for a spirv
image) the tensors live in device memory: numpy inputs are copied in, and results copied back.

    prog = tessera.executor.load("model.tessera", runtime.select_backend("cuda"))
    Y = prog.mlp(X, W1, b1, W2)                         # numpy in, numpy out
    Yd = prog.mlp(DeviceArray.from_numpy(X), ...)       # DeviceArrays in: DeviceArrays out, no copies
    with tessera.stream.use(s):                         # or stream=s: launches queued on s
        Yd = prog.mlp(Xd, ...)

An input has exactly the dtype its parameter declares; nothing is converted implicitly (docs/runtime.md,
"Argument dtypes"). It is a numpy array of that dtype (f32: float32, f64: float64, f16: float16, i32: int32,
...); for bf16, tf32 and fp8, which numpy lacks, a float32 array of values, rounded as the type rounds (bf16
also takes its bit patterns, as uint16); or a `tessera.runtime.DeviceArray` holding what the plan stores (bf16
as uint16 bit patterns; fp8 as the plan stores it: a uint8 array of bit patterns where the parameter is one byte
wide — read only by elementwise kernels, or by the sm_90a GEMM — else float32), used in place. Any other is a
TypeError naming function, argument and both dtypes; the arrays for a tile program's outputs too. Any other
DLPack tensor (a torch tensor, a JAX array) is taken zero-copy as `tessera.runtime.from_dlpack` takes it: host
memory as a numpy array, device memory of the context's backend as a DeviceArray; a strided device tensor (a
torch CUDA `.t()` or slice, a column-major JAX array), which from_dlpack refuses as DeviceArrays are compact,
goes to libtessera as it is, with its shape and strides (libtessera gathers it and scatters a tile program's
output back; not in a graph capture), its producer's tensor kept for the call and its stream's queued work.
When any input is in device memory the call runs there (also on the CPU backend) and returns DeviceArrays (bf16
as bit patterns, one-byte fp8 as uint8 bit patterns); otherwise numpy arrays (bf16 and fp8 as float32). A wrong rank, extent or count of arguments is a ValueError
(tessera._runtime.ArgumentError, libtessera's message, naming function and argument). Intermediates come from
the context's pool, per call. Launches go to `stream` (default: the current one, else none: each runs at once);
a call returning numpy arrays waits for its stream first, one returning DeviceArrays does not (libtessera
releases its intermediates in stream order). A tile program's outputs are also written into the arrays passed
for them.

A device function's common call takes a quick path (Function._device_call): every argument a DeviceArray of the
context holding what the plan stores, or a compact torch CUDA tensor of a (dtype, device) an earlier call took
through DLPack, and no capture. It skips the per-argument work in Python (no DLPack capsule where torch's
current stream is its default one; result shapes cached per signature of input shapes; libtessera checks every
call as before); anything else takes the full path, with its errors. TESSERA_DEVICE_QUICK_CALL=0 turns it off.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from . import plan as plans
from . import runtime
from . import stream as streams
from .image.format import ARG_READONLY
from .numerics.rounding import fp8_bits, fp8_values, round_to

_DEVICE = (runtime.DeviceArray, runtime._StridedDevice)  # tensors in device memory, used in place
_NUMPY = runtime._NUMPY  # a plan value's storage (bf16 and fp8 intermediates as their bit patterns)
# numpy has no dtype for these: a call takes float32 arrays of their values, rounded as the type rounds
_VALUES_AS_F32 = ("bf16", "tf32", "fp8_e4m3", "fp8_e5m2")
# ml_dtypes' numpy dtypes of the fp8 formats: where the plan stores fp8 one byte wide (ptx sm_90a), such an
# array is taken as the bit patterns it holds
_ML_DTYPES = {"fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}


def _accepted(declared: str, storage: str) -> tuple[np.dtype, ...]:
    """The numpy dtypes a call takes for a parameter that declares `declared` and that the plan stores as
    `storage`: the declared dtype's own, or for one numpy lacks float32 values, and its bit patterns too where
    the plan stores them (bf16 as uint16)."""
    if declared not in _VALUES_AS_F32:
        return (np.dtype(_NUMPY[declared]),)
    bits = np.dtype(_NUMPY[declared])
    return (np.dtype(np.float32),) + ((bits,) if storage == declared and bits != np.float32 else ())


def numpy_dtype(arg: plans.Value) -> np.dtype:
    """The numpy dtype of a numpy array a call takes for plan argument `arg` (float32 values for bf16, tf32 and
    fp8)."""
    return _accepted(arg.declared or arg.dtype, arg.dtype)[0]


def storage(arg: plans.Value, x: np.ndarray) -> np.ndarray:
    """An array of `numpy_dtype(arg)` as plan argument `arg` is stored, the form a DeviceArray of it holds
    (bf16 as uint16 bit patterns, fp8 as bytes)."""
    return _to_storage(x, arg.dtype)


def _takes(declared: str, storage: str) -> str:
    """What `_accepted` takes, in words."""
    if declared not in _VALUES_AS_F32:
        return runtime.storage_spelling(declared)
    bits = _accepted(declared, storage)[1:]
    ml = f" or ml_dtypes {_ML_DTYPES[declared]} arrays" if bits and declared in _ML_DTYPES else ""
    return "float32 values" + (f" or {runtime.storage_spelling(declared)}" if bits else "") + ml


def _to_storage(x: np.ndarray, dtype: str, compact: bool = True) -> np.ndarray:
    """An accepted array (`_accepted`) as the plan stores dtype `dtype`; `compact`: C-contiguous (else an array
    of the stored dtype keeps its strides, which libtessera's executor takes)."""
    if dtype == "bf16" and x.dtype == np.float32:  # the top half of an f32: round to nearest even, keep it
        r = round_to(x.astype(np.float64), "bf16").astype(np.float32)
        return runtime.compact((r.view(np.uint32) >> 16).astype(np.uint16))
    if dtype in _ML_DTYPES and x.dtype == np.float32:   # one-byte fp8: rounded as the interpreter rounds
        return runtime.compact(fp8_bits(x, dtype))
    if dtype == "tf32":  # an f32 whose low 13 fraction bits are zero: round to nearest even
        return runtime.compact(round_to(x.astype(np.float64), "tf32").astype(np.float32))
    return runtime.compact(x) if compact else x


def _from_storage(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bf16":
        return (x.astype(np.uint32) << 16).view(np.float32)
    if dtype in _ML_DTYPES:   # a one-byte fp8 result: its values (exact in float32)
        return fp8_values(x, dtype).astype(np.float32)
    return x


class Function:
    """Function `name` of a module: its plan (a plans.Plan, or the JSON document the compile metadata holds), run
    by libtessera's plan executor (tsrFunctionCall). Python adds what C does not: numpy arrays and DLPack
    tensors as arguments, the dtype rules above, the results' allocation, copies to and from device memory,
    streams, and keeping arrays alive for queued work."""

    def __init__(self, name: str, plan: plans.Plan | dict, module: runtime.Module):
        self.name = name
        self.plan = plan if isinstance(plan, plans.Plan) else plans.Plan.from_json(plan)
        self.module = module
        self.device = module.context.backend not in runtime._HOST_MEMORY  # tensors live in device arrays
        self._native = module._native.function(name)
        self._written: set[int] | None = None
        # result i is the tensor a tile program writes into argument j: the call writes it in place there
        self._in_place = {r: i for r, (i, vid) in enumerate(zip(self.plan.outputs, self.plan.results))
                          if self.plan.args[i] == vid}
        # per argument: the numpy dtype used as it is (no conversion: tf32 is always rounded), for the common
        # call's quick path; the checks and conversions of _input for everything else
        self._plain = []
        for vid in self.plan.args:
            spec = self.plan.values[vid]
            stored = np.dtype(_NUMPY[spec.dtype])
            plain = spec.dtype != "tf32" and stored in _accepted(spec.declared or spec.dtype, spec.dtype)
            self._plain.append(stored if plain else None)
        self._results = [np.dtype(_NUMPY[self.plan.values[vid].dtype]) for vid in self.plan.results]
        self._stored = [np.dtype(_NUMPY[self.plan.values[vid].dtype]) for vid in self.plan.args]
        # a host call whose results are returned as allocated (none written in place, no bf16 or fp8 bits to
        # widen) takes libtessera's quick path when every argument is used as it is: one C++ step (call_plain)
        self._quick = not self.device and not self.plan.outputs and \
            all(self.plan.values[vid].dtype not in ("bf16", *_ML_DTYPES) for vid in self.plan.results)
        if self._quick:
            self._native.set_plain(self._plain, self._results)
        # the device call's quick path (_device_call): a function with device memory of its own, no tile program
        # outputs (TESSERA_DEVICE_QUICK_CALL=0 turns it off, to compare); the result shapes it computed per
        # signature of input shapes, and the storage dtype the full path's DLPack import gave each (torch dtype,
        # device) of compact torch tensors it took
        self._device_quick = self.device and not self.plan.outputs and \
            os.environ.get("TESSERA_DEVICE_QUICK_CALL", "1") != "0"
        self._shapes: dict = {}
        self._torch_dtypes: dict = {}

    def __call__(self, *arrays, stream=None, comm=None):
        """`comm` (a tessera.comm.Communicator) runs the plan's collective steps: every rank calls with its own
        tensors (docs/language.md, "Compiled collectives")."""
        if self._quick and stream is None and comm is None and runtime._current_stream() is None:
            out = self._native.call_plain(arrays)
            if out is not None:
                return out
        if self._device_quick and comm is None:
            out = self._device_call(arrays, stream if stream is not None else runtime._current_stream())
            if out is not None:
                return out
        p, ctx = self.plan, self.module.context
        native_comm = getattr(getattr(comm, "_c", None), "address", None) if comm is not None else 0
        if native_comm is None:
            raise TypeError(f"'{self.name}': comm= takes a tessera.comm.Communicator, not {type(comm).__name__}")
        if len(arrays) != len(p.args):
            raise TypeError(f"'{self.name}' takes {len(p.args)} arguments ({', '.join(p.params)}), "
                            f"got {len(arrays)}")
        # zero-copy: numpy arrays, DeviceArrays, or strided device tensors (_StridedDevice), which no DeviceArray is
        # a tile program's output may be returned as it was passed (a DeviceArray whose copies need its range
        # registered); any other argument goes only to libtessera, which takes unknown memory unchecked
        given = arrays
        arrays = [a if isinstance(a, (np.ndarray, runtime.DeviceArray)) or not hasattr(a, "__dlpack__")
                  else runtime._dlpack_argument(a, ctx, i in p.outputs) for i, a in enumerate(arrays)]
        if self._device_quick:  # what DLPack gave compact torch tensors: _device_call takes the next ones itself
            torch = sys.modules.get("torch")
            for a, b in zip(given, arrays):
                if torch is not None and type(a) is torch.Tensor and type(b) is runtime.DeviceArray:
                    self._torch_dtypes[a.dtype, a.device] = b.dtype
        given_device = any(isinstance(a, _DEVICE) for a in arrays)
        # the quick path again only where a DLPack host tensor (torch CPU) became a numpy array: with the same
        # arguments it would refuse them again
        converted = any(a is not b for a, b in zip(arrays, given))
        if self._quick and converted and not given_device and stream is None and comm is None and \
                runtime._current_stream() is None:
            out = self._native.call_plain(tuple(arrays))
            if out is not None:
                return out
        device = self.device or given_device
        s = stream if stream is not None else runtime._current_stream()
        if s is not None and s.capture is not None and device and not given_device:
            raise ValueError(f"'{self.name}' is being captured into a graph: pass DeviceArrays, which the "
                             f"graph's replays write, to get its results")
        # libtessera gathers a strided tensor itself, but cannot record that in a graph: a capture gets copies
        capturing = s is not None and s.capture is not None
        inputs = []
        for index, a in enumerate(arrays):
            if type(a) is np.ndarray and a.dtype == self._plain[index] and not device and a.flags.writeable and \
                    not (capturing and not a.flags.c_contiguous):
                inputs.append(a)  # used as it is: what _input would decide, without its checks' cost
            elif type(a) is runtime.DeviceArray and a.dtype == self._stored[index] and a.context is ctx:
                inputs.append(a)  # likewise: a DeviceArray of this context holding what the plan stores
            else:
                inputs.append(self._input(index, p.params[index], a, p.values[p.args[index]], device, capturing))
        native_in = [_native(x) for x in inputs]
        results = []
        for r, (dtype, shape) in enumerate(zip(self._results, self._native.result_shapes(native_in))):
            if r in self._in_place:
                results.append(inputs[self._in_place[r]])
            else:
                results.append(runtime.DeviceArray(shape, dtype, ctx) if device else np.empty(shape, dtype))
        self._native.call(native_in, [_native(x) for x in results], None if s is None else s.native,
                          native_comm)
        if s is not None:  # queued or recorded: the arrays must outlive the work
            s.keep(*inputs, *results)
        if given_device:  # a strided device tensor (a tile program's output written in place) as it was passed
            outs = [r.producer if isinstance(r, runtime._StridedDevice) else r for r in results]
        else:
            if s is not None and s.capture is None:
                s.synchronize()  # numpy results are read now (copies back run on the NULL stream, unordered)
            if device:
                results = [r.numpy() for r in results]
            outs = [_from_storage(r, p.values[v].dtype) for r, v in zip(results, p.results)]
        for index, vid, raw in zip(p.outputs, p.results, results):  # a tile program writes its outputs in place
            if inputs[index] is not arrays[index]:  # else libtessera wrote the array passed, as it was passed
                self._write_output(arrays[index], raw, p.values[vid].dtype, stream)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _device_call(self, arrays, s):
        """The common call of a device function, shortened (None where it does not apply: the full path then runs
        with all its checks and errors): every argument a DeviceArray of this context holding what the plan stores,
        or a compact torch tensor of a (dtype, device) the full path took through DLPack before, holding the
        storage dtype; no stream, or one not capturing. What the full path does for these, without its per-call
        work: no DLPack capsule (a torch tensor's address, shape and the kept tensor instead; only where torch's
        current stream is its default stream, when torch's `__dlpack__` queues nothing either), the result
        shapes computed once per signature of input shapes (libtessera's call checks every extent again). The
        results are DeviceArrays, kept by the stream with the arguments until its work has run."""
        if len(arrays) != len(self._stored) or (s is not None and s.capture is not None):
            return None
        ctx, stored = self.module.context, self._stored
        native_in, torch, streams_checked = [], None, False
        for i, a in enumerate(arrays):
            t = type(a)
            if t is runtime.DeviceArray:
                if a.dtype != stored[i] or a.context is not ctx:
                    return None
                native_in.append((a.address, a.shape))
                continue
            if torch is None:
                torch = sys.modules.get("torch")
            if torch is None or t is not torch.Tensor or not self._torch_dtypes:
                return None
            if self._torch_dtypes.get((a.dtype, a.device)) != stored[i] or a.requires_grad or \
                    a.layout is not torch.strided or not a.is_contiguous() or a.is_conj() or a.is_neg():
                return None
            if not streams_checked:
                if not _torch_streams_agree(torch):
                    return None
                streams_checked = True
            shape = tuple(a.shape)
            if 0 in shape:
                return None
            native_in.append((a.data_ptr(), shape))
        key = tuple(x[1] for x in native_in)
        shapes = self._shapes.get(key)
        if shapes is None:
            shapes = self._native.result_shapes(native_in)
            if len(self._shapes) < 64:
                self._shapes[key] = shapes
        results = [runtime.DeviceArray(shape, dtype, ctx) for dtype, shape in zip(self._results, shapes)]
        self._native.call(native_in, [(r.address, r.shape) for r in results], None if s is None else s.native, 0)
        if s is not None:  # queued: the arguments (torch tensors: their memory) and results outlive the work
            s._kept.extend(arrays)
            s._kept.extend(results)
        return results[0] if len(results) == 1 else tuple(results)

    def _written_args(self) -> set[int]:
        """Indices of the arguments a call writes: a tile program's outputs, and those that a kernel's
        argument records (the image's) say it writes, through any alias of them."""
        if self._written is None:
            p, of = self.plan, {}
            written = set()
            for step in p.steps:
                if isinstance(step, plans.AliasStep):
                    of[step.alias] = step.of
                    continue
                if isinstance(step, plans.ArgsStep):
                    kernels = [step.kernel, *(alt.kernel for alt in step.prefer)]
                    values = [a.value if isinstance(a, plans.TensorArg) else None for a in step.args]
                else:
                    kernels, values = [step.kernel], [t.value for t in step.tensors]
                for name in set(kernels) & set(self.module.kernel_names):
                    params = self.module.kernel(name).params
                    written.update(v for v, a in zip(values, params) if v and not a.flags & ARG_READONLY)
            for vid in list(written):
                while vid in of:
                    vid = of[vid]
                    written.add(vid)
            self._written = set(p.outputs) | {i for i, vid in enumerate(p.args) if vid in written}
        return self._written

    def _check_dtype(self, pname: str, a, spec: plans.Value) -> None:
        """The rule of docs/runtime.md ("Argument dtypes"): an argument has the dtype its parameter declares,
        and nothing is converted implicitly; a DeviceArray holds what the plan stores, as it is used in place."""
        where = f"argument '{pname}' of '{self.name}'"
        declared = spec.declared or spec.dtype
        if isinstance(a, _DEVICE):
            storage = np.dtype(_NUMPY[spec.dtype])
            if a.dtype != storage:
                held = f"{storage.name} bit patterns" if spec.dtype in runtime.BIT_PATTERNS else \
                    f"{storage.name} values, as this target stores them" if declared != spec.dtype else storage.name
                kind = "a DeviceArray" if isinstance(a, runtime.DeviceArray) else "a device tensor"
                takes = f"{kind} of {declared} ({held})"
                raise runtime.dtype_error(where, declared, f"{kind} of {a.dtype}", takes)
            return
        if not isinstance(a, (np.ndarray, np.generic)):
            raise TypeError(f"{where} must be a numpy array or a tessera.runtime.DeviceArray, "
                            f"got {type(a).__name__}")
        if a.dtype not in _accepted(declared, spec.dtype):
            raise runtime.dtype_error(where, declared, a.dtype, _takes(declared, spec.dtype))

    def _input(self, index: int, pname: str, a, spec: plans.Value, device: bool, compact: bool):
        """An argument as the plan stores it: a DeviceArray used in place, or a numpy array converted to the
        parameter's storage (a copy only where its dtype differs, or, with `compact`, its layout; copied to the
        device when the call runs there)."""
        if isinstance(a, np.ndarray) and a.dtype.name == _ML_DTYPES.get(spec.dtype):
            a = a.view(np.uint8)   # one-byte fp8 storage: the array's bytes are its bit patterns
        self._check_dtype(pname, a, spec)
        if isinstance(a, runtime._StridedDevice):  # of this context (taken with it), used in place
            return a
        if isinstance(a, runtime.DeviceArray):
            if a.context is not self.module.context:
                raise ValueError(f"argument '{pname}' of '{self.name}' is a DeviceArray of another context")
            return a
        a = np.asarray(a)
        if not a.flags.writeable and index in self._written_args():
            raise ValueError(f"argument '{pname}' of '{self.name}' is written by the call, but the array "
                             f"is read-only (a view of bytes, a read-only mapping, or writeable=False)")
        x = _to_storage(a, spec.dtype, compact)
        return runtime.DeviceArray.from_numpy(x, self.module.context) if device else x

    def _write_output(self, target, raw, dtype: str, stream) -> None:
        """A result, stored as `dtype` in `raw`, into the array passed for it, which has a dtype its parameter
        takes (`_check_dtype`): bf16 bit patterns into uint16, bf16 values into float32, an fp8 container's
        f16 values into float32; never a conversion that loses anything."""
        if isinstance(target, runtime.DeviceArray):
            if raw.address != target.address:  # else the kernels wrote into it already
                streams.memcpy_async(target, raw.reshape(target.shape), stream=stream)
            return
        if isinstance(raw, runtime.DeviceArray):  # a call given DeviceArrays too returns DeviceArrays
            raw = raw.numpy()
        source = raw if raw.dtype == target.dtype else _from_storage(raw, dtype)
        np.copyto(target, source.reshape(target.shape), casting="safe")


_TORCH_STREAMS = []  # torch._C's (getDevice, getCurrentStream, getDefaultStream), or [None] where it has none


def _torch_streams_agree(torch) -> bool:
    """Whether torch's current CUDA stream is its default stream on the current device: then torch's
    `__dlpack__()` (no stream named: the consumer's is the legacy default stream) queues no event wait, and a
    tensor's memory can be taken as it is."""
    if not _TORCH_STREAMS:
        C = torch._C
        names = ("_cuda_getDevice", "_cuda_getCurrentStream", "_cuda_getDefaultStream")
        _TORCH_STREAMS.extend([tuple(getattr(C, n) for n in names)] if all(hasattr(C, n) for n in names) else [None])
    if _TORCH_STREAMS[0] is None:
        return False
    device, current, default = _TORCH_STREAMS[0]
    index = device()
    return current(index)[0] == default(index)[0]


def _native(x):
    """A tensor as tessera._runtime.Function takes it: a numpy array, (address, shape) of a DeviceArray, or
    (address, shape, strides) of a strided device tensor."""
    if isinstance(x, np.ndarray):
        return x
    return (x.address, x.shape, x.strides) if isinstance(x, runtime._StridedDevice) else (x.address, x.shape)


class Program:
    """The functions of an image, by name."""

    def __init__(self, data: bytes, context=None):
        self.module = runtime.load(data, context)
        try:
            section = self.module.image.plan  # ImageError where the versions rule refuses it
            self.plans = plans.decode(section) if section is not None else {}
        except (ValueError, KeyError, TypeError) as e:  # ImageError, PlanError, and the JSON of another format
            raise runtime.bad_image("launch plans", e) from None
        # the plans' JSON documents, as the compile metadata's "plans" holds them
        self.functions = {name: p.to_json() for name, p in self.plans.items()}
        self._cache: dict[str, Function] = {}

    def function(self, name: str) -> Function:
        if name not in self.functions:
            raise KeyError(f"no function '{name}' in this image (functions: {', '.join(self.functions) or 'none'})")
        if name not in self._cache:
            self._cache[name] = Function(name, self.plans[name], self.module)
        return self._cache[name]

    def __getattr__(self, name: str) -> Function:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self.function(name)
        except KeyError as e:
            raise AttributeError(str(e)) from None


def load(image, context=None) -> Program:
    if isinstance(image, (str, os.PathLike)):
        with open(image, "rb") as f:
            image = f.read()
    return Program(bytes(image), context)

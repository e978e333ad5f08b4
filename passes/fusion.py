"""``tessera-fuse``: the fusion phase — which Graph IR ops share one kernel.

Groups (recorded as ``tessera.group = N`` and ``tessera.group_kind`` on each op):
- ``gemm``: a matmul and the elementwise epilogue that consumes it alone (bias along the last axis, one
  unary function, a scalar scale, a residual of the output's shape; where the target lists them in
  `gemm_epilogue`, a scale by a 0-d tensor and a subtraction from a tensor: `W − lr·(Xᵀ·dZ)`, an SGD update;
  and a product with the GELU's derivative at a tensor Z, `dH ∘ gelu'(Z)`, whose formula's ops — autodiff's,
  read only by that product — join the group: the epilogue computes gelu'(Z) from Z), applied before the single
  store; with `scale_by2`, a second scale by a 0-d tensor (a scaled fp8 GEMM's two scales), and with `cast`, a
  cast of the f32 accumulator to bf16 or f16 as the group's last step (the store rounds once);
- ``elementwise``: a chain of elementwise ops over one output shape, whose intermediate values have no
  other user — one pass over memory instead of one per op;
- ``row``: softmax, log_softmax, layernorm, rmsnorm, and reductions over trailing axes — one warp per row; a
  dropout of a softmax joins it (attention's softmax + dropout, before the product with V);
- ``attention``: `matmul(Q, Kᵀ) → [· scale] → softmax → [dropout] → matmul(·, V)`, each value used only by
  the next (an `op.flash_attention` the schedule phase decomposed, or the ops written out), on a target with
  a fused attention kernel: one kernel computes the scores, softmax, dropout and the product with V of a
  block of query rows without writing the probabilities (backends/cpu/attention.py); an undecomposed
  `flash_attention` is a group of its own. The transpose making the chain's Kᵀ from K joins the chain's
  group where the chain is its only user (`keys_transpose`: the kernel packs its key strips from K's rows).
  The `attention_lse` of attention's backward joins the group of the forward of the same Q, K, causal and
  scale (one kernel writes O and the row log-sum-exps), or is a group of its own where no forward matches;
- ``attention_bwd``: the `attention_grad` ops of one attention (identical operands, causal and scale): one
  kernel computes the gradients present, recomputing the probabilities block by block. attention_lse and
  attention_grad reach this phase only on targets with kernels for them (`TargetFacts.
  fused_attention_backward`); elsewhere passes/decompose.py has rewritten them into GEMMs;
- ``layout`` (transpose), ``view`` (reshape: no kernel, the buffer is reinterpreted);
- ``blocks``: a masked tile load (rows padded to whole blocks) or store (only the rows inside written);
  a masked tile (`ttensor.mask_blocks`) is elementwise.
0-d constants are not grouped: kernels inline them.
"""

from __future__ import annotations

from ..diagnostics import LoweringError
from ..mlir import ir
from . import autodiff, graph_shapes
from . import schedule_ir
from .schedule_ir import graph_ops

ELEMENTWISE = {"ttensor.unary", "ttensor.binary", "ttensor.bias_add", "ttensor.cast", "ttensor.broadcast",
               "ttensor.dropout", "ttensor.mask_blocks", "ttensor.select"}
# Operands an op reads only for their extents: no kernel loads them, the plan passes the extent.
EXTENT_ONLY = {"ttensor.store_blocks": 1, "ttensor.mask_blocks": 1, "ttensor.col2im": 1}
ROW = {"ttensor.softmax", "ttensor.log_softmax", "ttensor.layernorm", "ttensor.rmsnorm", "ttensor.reduce"}
EPILOGUE_UNARY = {"relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh"}


def is_scalar_constant(v: ir.Value) -> bool:
    owner = v.owner
    return (isinstance(owner, ir.OpView) and owner.operation.name == "ttensor.constant"
            and ir.RankedTensorType(v.type).rank == 0)


# Group kinds whose kernels write a 0-d constant operand in as a literal (kernelgen's elementwise kernels, a
# GEMM's scale, attention's softmax scale) instead of loading it.
INLINES_CONSTANTS = {"elementwise", "gemm", "attention"}


def constant_in_memory(op) -> bool:
    """Must the ttensor.constant `op` be written to storage by a kernel of its own? Only its consumers that
    inline 0-d constants can do without: a view (reshape) aliases the constant's storage, a call passes it,
    a return hands it out, a row or layout kernel loads it, and a shaped constant is loaded by every kernel.
    Left out, its storage is read but never written (garbage: uninitialized memory)."""
    v = op.results[0]
    if ir.RankedTensorType(v.type).rank != 0:
        return True
    for use in v.uses:
        owner = use.owner
        owner = getattr(owner, "operation", owner)
        if owner.name == "func.return" or kind_of(owner) not in INLINES_CONSTANTS:
            return True
    return False


def data_operands(op) -> list:
    """The operands whose elements `op` reads."""
    skip = EXTENT_ONLY.get(op.operation.name)
    return [o for i, o in enumerate(op.operands) if i != skip]


def _uses(v: ir.Value) -> int:
    return sum(1 for _ in v.uses)


def kind_of(op) -> str | None:
    name = op.operation.name
    if name == "ttensor.matmul":
        return "gemm"
    if name in ELEMENTWISE:
        return "elementwise"
    if name in ROW:
        return "row"
    if name == "ttensor.transpose":
        return "layout"
    if name in ("ttensor.reshape", "tensor.cast"):   # a cast around an imported call changes no data
        return "view"
    if name == "func.call":   # a call of an imported function (same-file calls are inlined): a call step
        return "call"
    if name.startswith("tdist."):   # a collective: a plan step of its own, run by the communicator
        return "collective"
    if name in ("ttensor.flash_attention", "ttensor.attention_lse"):
        return "attention"
    if name == "ttensor.attention_grad":
        return "attention_bwd"
    if name == "ttensor.flash_attention_fp8":   # kept only where the target has its kernel (decompose.attention_fp8)
        return "attention_fp8"
    if name in ("ttensor.load_blocks", "ttensor.store_blocks"):
        return "blocks"
    if name == "ttensor.push":   # reads the history one place over: a kernel of its own (kernelgen.push)
        return "push"
    if name in ("ttensor.im2col", "ttensor.col2im"):   # gathers of windows: kernels of their own
        return name[len("ttensor."):]                     # (passes/convolution.py)
    # DFT matrices, FFT stages, complex storage: kernels of their own (passes/fourier.py, passes/fft.py)
    if name in ("ttensor.twiddle", "ttensor.interleave", "ttensor.part", "ttensor.fft_stage", "ttensor.chirp",
                "ttensor.chirp_mul", "ttensor.spectrum_mul"):
        return "fourier"
    if name in ("ttensor.linalg", "ttensor.slice"):   # looping matrix algorithms and the slices of their packed
        return "linalg"                              # results: kernels of their own (passes/linalg_kernels.py)
    return None


def _epilogue_step(op, acc: ir.Value, dims: dict, extra: frozenset = frozenset()) -> bool:
    """Can `op` (consuming the gemm accumulator value `acc`) run in the gemm's epilogue? `extra`: the
    target's further steps (TargetFacts.gemm_epilogue)."""
    name = op.operation.name
    same_shape = op.results[0].type == acc.type and dims.get(op.results[0]) == dims.get(acc)
    if name == "ttensor.bias_add":
        axis = ir.IntegerAttr(op.attributes["axis"]).value
        return op.operands[0] == acc and axis in (-1, ir.RankedTensorType(acc.type).rank - 1) and same_shape
    if name == "ttensor.unary":
        return ir.StringAttr(op.attributes["fn"]).value in EPILOGUE_UNARY
    if name == "ttensor.cast":
        return "cast" in extra and op.operands[0] == acc and str(ir.RankedTensorType(acc.type).element_type) == \
            "f32" and str(ir.RankedTensorType(op.results[0].type).element_type) in ("bf16", "f16") and \
            dims.get(op.results[0]) == dims.get(acc) and "tessera.round_to" not in op.attributes
    if name == "ttensor.binary" and same_shape:
        fn = ir.StringAttr(op.attributes["fn"]).value
        other = op.operands[1] if op.operands[0] == acc else op.operands[0]
        if fn == "mul" and is_scalar_constant(other):
            return True
        if fn == "mul" and "scale_by" in extra and other != acc and _f32(other) and \
                ir.RankedTensorType(other.type).rank == 0:
            return True
        if fn == "sub" and "sub_from" in extra and op.operands[1] == acc and other != acc:
            return other.type == acc.type and dims.get(other) == dims.get(acc)
        return fn == "add" and other.type == acc.type and dims.get(other) == dims.get(acc)
    return False


class _Formula:
    """autodiff's emitter interface writing a formula as a tree instead of ops: ("x",) the operand,
    ("const", c), ("binary", fn, a, b), ("unary", fn, a)."""

    def const(self, value, like):
        return ("const", value)

    def bin(self, fn, a, b, result_type=None):
        return ("binary", fn, a, b)

    def add(self, a, b, t=None):
        return self.bin("add", a, b)

    def sub(self, a, b, t=None):
        return self.bin("sub", a, b)

    def mul(self, a, b, t=None):
        return self.bin("mul", a, b)

    def scale(self, x, c):
        return self.mul(x, self.const(c, x))

    def shift(self, x, c):
        return self.add(x, self.const(c, x))

    def un(self, fn, x):
        return ("unary", fn, x)


class _Operand(tuple):
    """The formula's operand, ("x",); formulas read its `type` (for their results' types)."""
    type = None


def _matches(v: ir.Value, tree: tuple, bound: dict, ops: list) -> bool:
    """Is `v` computed as `tree` says (the operand bound to one value throughout)? `ops` gets its ops."""
    if tree[0] == "x":
        return bound.setdefault("x", v) == v
    owner = v.owner
    if not isinstance(owner, ir.OpView):   # a block argument
        return False
    if tree[0] == "const":
        return is_scalar_constant(v) and \
            abs(ir.FloatAttr(owner.attributes["value"]).value - tree[1]) <= 1e-6 * abs(tree[1])
    if owner.operation.name != f"ttensor.{tree[0]}" or ir.StringAttr(owner.attributes["fn"]).value != tree[1] or \
            len(owner.operands) != len(tree) - 2:
        return False
    if not all(_matches(o, t, bound, ops) for o, t in zip(owner.operands, tree[2:])):
        return False
    ops.append(owner)
    return True


def gelu_derivative(v: ir.Value):
    """(GEMM epilogue step, Z, the ops computing it) where `v` is autodiff's gelu'(Z) or gelu_tanh'(Z), the
    ops each once; None otherwise."""
    for fn, formula in autodiff.GELU_DERIVATIVES.items():
        bound, ops = {}, []
        if _matches(v, formula(_Formula(), _Operand(("x",)), None), bound, ops):
            return f"{fn}_grad", bound["x"], list({op.results[0]: op for op in ops}.values())
    return None


def _derivative_step(op, acc: ir.Value, dims: dict, extra: frozenset):
    """gelu_derivative's match where `op` is acc ∘ gelu'(Z) and the target's GEMM epilogue computes it: Z of
    the accumulator's f32 type and extents, and the formula's values read by nothing but its ops and `op`
    (they are not written)."""
    if op.operation.name != "ttensor.binary" or ir.StringAttr(op.attributes["fn"]).value != "mul":
        return None
    other = op.operands[1] if op.operands[0] == acc else op.operands[0]
    found = None if other == acc else gelu_derivative(other)
    if found is None or found[0] not in extra:
        return None
    z, inner = found[1], found[2]
    if z.type != acc.type or dims.get(z) != dims.get(acc) or not _f32(z) or op.results[0].type != acc.type:
        return None
    inside = {m.results[0] for m in inner} | {op.results[0]}
    for m in inner:
        for use in m.results[0].uses:
            owner = getattr(use.owner, "operation", use.owner)
            if len(owner.results) != 1 or owner.results[0] not in inside:
                return None
    return found


def _only_user(v: ir.Value):
    users = [u.owner for u in v.uses]
    return users[0] if len(users) == 1 else None


def _f32(*values) -> bool:
    return all(str(ir.RankedTensorType(v.type).element_type) == "f32" for v in values)


def attention_chains(fn, dims: dict) -> list[list]:
    """The ops of each `matmul(Q, Kᵀ) → [· scalar] → softmax(last axis) → [dropout] → matmul(·, V)` of `fn`
    whose values each feed only the next op, in f32 with Q, Kᵀ and V of equal batch extents."""
    chains = []
    for op in graph_ops(fn):
        if op.operation.name != "ttensor.matmul":
            continue
        chain, v = [op], op.results[0]
        nxt = _only_user(v)
        if nxt is not None and nxt.operation.name == "ttensor.binary" and ir.StringAttr(nxt.attributes["fn"]).value \
                == "mul" and any(is_scalar_constant(o) for o in nxt.operands) and nxt.results[0].type == v.type:
            chain.append(nxt)
            v = nxt.results[0]
            nxt = _only_user(v)
        rank = ir.RankedTensorType(v.type).rank
        if nxt is None or nxt.operation.name != "ttensor.softmax" or \
                ir.IntegerAttr(nxt.attributes["axis"]).value % rank != rank - 1:
            continue
        chain.append(nxt)
        v = nxt.results[0]
        nxt = _only_user(v)
        if nxt is not None and nxt.operation.name == "ttensor.dropout":
            chain.append(nxt)
            v = nxt.results[0]
            nxt = _only_user(v)
        if nxt is None or nxt.operation.name != "ttensor.matmul" or nxt.operands[0] != v:
            continue
        chain.append(nxt)
        q, kt, val = op.operands[0], op.operands[1], nxt.operands[1]
        if not _f32(q, kt, val, op.results[0], nxt.results[0]):
            continue
        if not (len(dims[q]) == len(dims[kt]) == len(dims[val]) and dims[q][:-2] == dims[kt][:-2] == dims[val][:-2]):
            continue
        chains.append(chain)
    return chains


def keys_transpose(chain: list) -> list:
    """[the `ttensor.transpose`] that makes the Kᵀ of attention chain `chain` from K's rows (swapping its last
    two axes) where the chain's first matmul is its only user, else []. It joins the chain's group: the CPU
    kernel packs its key strips from K's rows (backends/cpu/attention.py), so no layout kernel writes Kᵀ."""
    kt = chain[0].operands[1]
    owner = kt.owner
    if not isinstance(owner, ir.OpView) or owner.operation.name != "ttensor.transpose" or _only_user(kt) is None:
        return []
    perm = [ir.IntegerAttr(p).value for p in ir.ArrayAttr(owner.attributes["perm"])]
    rank = len(perm)
    if rank < 2 or perm != list(range(rank - 2)) + [rank - 1, rank - 2] or not _f32(owner.operands[0]):
        return []
    return [owner]


def _forward_key(chain: list):
    """(Q, K, causal, scale) of a fused attention chain: the key the attention_lse of the same attention
    has; None where its first product is not Q times the transpose of a K."""
    chain = [op for op in chain if op.operation.name != "ttensor.transpose"]   # a folded Kᵀ (keys_transpose)
    q, kt = chain[0].operands
    perm = [ir.IntegerAttr(p).value for p in ir.ArrayAttr(kt.owner.attributes["perm"])] \
        if isinstance(kt.owner, ir.OpView) and kt.owner.operation.name == "ttensor.transpose" else []
    rank = len(perm)
    if perm != list(range(rank - 2)) + [rank - 1, rank - 2]:
        return None
    scale, causal = 1.0, False
    for op in chain[1:-1]:
        if op.operation.name == "ttensor.binary":
            c = next(o for o in op.operands if is_scalar_constant(o))
            scale = ir.FloatAttr(c.owner.attributes["value"]).value
        elif op.operation.name == "ttensor.softmax":
            causal = "tessera.causal" in op.attributes
    return q, kt.owner.operands[0], causal, scale


def _attention_key(op) -> tuple:
    return (ir.BoolAttr(op.attributes["causal"]).value, ir.FloatAttr(op.attributes["scale"]).value)


def _attention_backward(fn, fused: dict, next_id: int) -> int:
    """Groups attention's backward ops (passes/autodiff_attention.py) into `fused`: each attention_lse with
    its forward (an undecomposed flash_attention, or a fused chain, of the same Q, K, causal and scale), the
    attention_grad ops of identical operands and attributes together; returns the next group id."""
    forwards: dict = {}   # (Q, K, causal, scale) -> the forward's group, or the flash_attention op
    chains: dict = {}
    for op, group in fused.items():
        chains.setdefault(group, []).append(op.opview)
    for group, ops in chains.items():
        key = _forward_key(ops)
        if key is not None:
            forwards.setdefault(key, group)
    ops = list(graph_ops(fn))
    for op in ops:
        if op.operation.name == "ttensor.flash_attention":
            forwards.setdefault((op.operands[0], op.operands[1], *_attention_key(op)), op)
    grads: dict = {}
    for op in ops:
        name = op.operation.name
        if name == "ttensor.attention_lse":
            key = (op.operands[0], op.operands[1], *_attention_key(op))
            group = forwards.get(key)
            if not isinstance(group, tuple):   # a flash_attention's group (with it), or one of its own
                forwards[key] = (next_id, "attention")
                next_id += 1
                if group is not None:
                    fused[group.operation] = forwards[key]
            fused[op.operation] = forwards[key]
        elif name == "ttensor.attention_grad":
            key = (tuple(op.operands), *_attention_key(op))
            if key not in grads:
                grads[key] = (next_id, "attention_bwd")
                next_id += 1
            fused[op.operation] = grads[key]
    return next_id


def run(fn, fused_attention: bool = False, gemm_epilogue: frozenset = frozenset()) -> int:
    """Annotates the ops of one function; returns the number of groups. `fused_attention`: the target has
    a kernel for attention groups; `gemm_epilogue`: its GEMMs' further epilogue steps (TargetFacts)."""
    dims = graph_shapes.infer(fn)      # symbolic extents: an epilogue operand must match the accumulator's exactly
    group_of: dict = {}   # result value -> (group id, kind)
    next_id = 0
    i32 = ir.IntegerType.get_signless(32)
    fused: dict = {}      # op -> its attention group
    # gemm group id -> its epilogue steps that take an operand (bias, scale, residual): the GEMM kernels have
    # one slot each, so a second residual add (a backward's summed cotangents) starts a group of its own
    with_operand: dict = {}
    for chain in (attention_chains(fn, dims) if fused_attention else []):
        for op in chain + keys_transpose(chain):   # the chain's first op stays first (_forward_key)
            fused[op.operation] = (next_id, "attention")
        next_id += 1
    next_id = _attention_backward(fn, fused, next_id)
    members: dict = {}    # group id -> its ops so far
    # each Graph IR op by its result (Operation objects hash by identity, and the bindings make several)
    position = {op.results[0]: i for i, op in enumerate(graph_ops(fn)) if len(op.results) == 1}
    for op in graph_ops(fn):
        kind = kind_of(op)
        if op.operation.name == "ttensor.constant":
            if constant_in_memory(op):
                # an elementwise kernel of its own that writes the value; kept out of group_of so that
                # no consumer joins it (those that inline it keep doing so)
                op.attributes["tessera.group"] = ir.IntegerAttr.get(i32, next_id)
                op.attributes["tessera.group_kind"] = ir.StringAttr.get("elementwise")
                next_id += 1
            continue
        if kind is None:
            continue
        if op.operation in fused:
            group = fused[op.operation]
            op.attributes["tessera.group"] = ir.IntegerAttr.get(i32, group[0])
            op.attributes["tessera.group_kind"] = ir.StringAttr.get(group[1])
            group_of[op.results[0]] = group
            continue
        joined = None
        if kind == "elementwise":
            for o in data_operands(op):
                g = group_of.get(o)
                if g is None or g[1] not in ("elementwise", "gemm", "row"):
                    continue
                if g[1] == "elementwise":   # the extents first: a hoist moves `op`
                    if _same_space(op.results[0], o, dims) and _joins_or_hoists(op, members.get(g[0], []), position):
                        joined = g
                        break
                    continue
                if _uses(o) != 1:
                    continue
                if g[1] == "row":  # softmax + dropout: the mask is applied as the probabilities are written
                    if op.operation.name == "ttensor.dropout" and o.owner.operation.name == "ttensor.softmax":
                        joined = g
                        break
                    continue
                # a cast (the store's conversion) ends the epilogue
                gemm = g[1] == "gemm" and "cast" not in with_operand.setdefault(g[0], set())
                step = _step_name(op) if gemm and _epilogue_step(op, o, dims, gemm_epilogue) else None
                if step == "scale_by" and step in with_operand[g[0]] and "scale_by2" in gemm_epilogue:
                    step = "scale_by2"
                if step is not None and step not in with_operand[g[0]]:
                    joined = g
                    if step in ("bias", "scale", "scale_by", "scale_by2", "residual", "sub_from", "cast"):
                        with_operand[g[0]].add(step)
                elif gemm and (found := _derivative_step(op, o, dims, gemm_epilogue)) and \
                        found[0] not in with_operand.setdefault(g[0], set()):
                    joined = g
                    with_operand[g[0]].add(found[0])
                    for m in found[2]:   # the formula's ops leave their groups: the epilogue computes it
                        old = group_of[m.results[0]]
                        members[old[0]] = [x for x in members[old[0]] if x.results[0] != m.results[0]]
                        m.attributes["tessera.group"] = ir.IntegerAttr.get(i32, g[0])
                        m.attributes["tessera.group_kind"] = ir.StringAttr.get("gemm")
                        group_of[m.results[0]] = g
                if joined:
                    break
        if joined is None and kind == "elementwise":
            joined = _sibling(op, members, group_of, position, dims)
        if joined is not None and joined[1] == "elementwise":
            # the groups of its other operands merged in: a sum or product of two terms built apart (a
            # cotangent times gelu'(x)) is one kernel, where the check allows the two as one group
            for o in data_operands(op):
                g = group_of.get(o)
                if g is not None and g != joined and g[1] == "elementwise" and _same_space(o, op.results[0], dims) and \
                        _joins_before_outside_users(op, members[joined[0]] + members[g[0]], position):
                    for m in members.pop(g[0]):
                        m.attributes["tessera.group"] = ir.IntegerAttr.get(i32, joined[0])
                        group_of[m.results[0]] = joined
                        members[joined[0]].append(m)
        if joined is None:
            joined = (next_id, kind)
            next_id += 1
        op.attributes["tessera.group"] = ir.IntegerAttr.get(i32, joined[0])
        op.attributes["tessera.group_kind"] = ir.StringAttr.get(joined[1])
        group_of[op.results[0]] = joined
        members.setdefault(joined[0], []).append(op)
    _check_requested_epilogue(fn)
    return next_id


def _joins_before_outside_users(op, members: list, position: dict) -> bool:
    """May elementwise `op` join the elementwise group of `members`? A group is a DAG, not only a chain: a
    value with several users (a backward's saved activation, read by each term of gelu's derivative) is
    computed once and its users fuse with it, the kernel writing every member value used outside it. But
    the group runs where its last op stands, so no op outside it may read a member's value before `op`
    (it would read it unwritten, and `op` could depend on it)."""
    here = position[op.results[0]]
    inside = {m.results[0] for m in members} | {op.results[0]}
    for m in members:
        for use in m.results[0].uses:
            r = use.owner.results[0] if len(use.owner.results) == 1 else None   # a return: after all
            if r not in inside and position.get(r, here + 1) < here:
                return False
    return True


def _joins_or_hoists(op, members: list, position: dict) -> bool:
    """`_joins_before_outside_users`, or else moves `op` (with its decision ops) up to right before the first
    outside reader of a member's value where all of `op`'s operands exist there: a cast of the cotangent that
    a bias's gradient reduces first (dZ to bf16 for the next GEMM) joins the kernel that computes dZ, which
    then writes both, instead of reading dZ back in a kernel of its own."""
    if _joins_before_outside_users(op, members, position):
        return True
    here = position[op.results[0]]
    inside = {m.results[0] for m in members}
    readers = [use.owner for m in members for use in m.results[0].uses
               if len(use.owner.results) == 1 and use.owner.results[0] not in inside]
    first = min(readers, key=lambda u: position.get(u.results[0], here), default=None)
    at = position.get(first.results[0], here) if first is not None else here
    if at >= here or any(position.get(o, -1) >= at for o in op.operands):
        return False
    target = (schedule_ir.decisions(first) or [first])[0]
    for d in schedule_ir.decisions(op):
        d.operation.move_before(target)
    op.operation.move_before(target)
    position[op.results[0]] = at - 0.5
    return True


def _sibling(op, members: dict, group_of: dict, position: dict, dims: dict):
    """An elementwise group of `op`'s output shape that already reads one of `op`'s operands, for `op` to
    join: the terms of a derivative read the same saved value (gelu's input: erf(x/√2) and exp(-x²/2)), and
    one kernel loads it once instead of one kernel per term writing its partial result."""
    for o in data_operands(op):
        for use in o.uses:
            g = group_of.get(use.owner.results[0]) if len(use.owner.results) == 1 else None
            if g is None or g[1] != "elementwise" or use.owner.results[0].type != op.results[0].type or \
                    dims.get(use.owner.results[0]) != dims.get(op.results[0]):
                continue
            if _joins_before_outside_users(op, members.get(g[0], []), position):
                return g
    return None


def _same_space(a: ir.Value, b: ir.Value, dims: dict) -> bool:
    """Do `a` and `b` span one iteration space that one elementwise kernel computes both in: equal extents,
    and element types that compute in the same type (kernelgen.compute_dtype; a bf16 rounding of an f32 value
    is a store's conversion, where an f64 value would compute in f64)?"""
    ta, tb = ir.RankedTensorType(a.type), ir.RankedTensorType(b.type)
    if ta.shape != tb.shape or dims.get(a) != dims.get(b):
        return False
    floats = {"f16", "bf16", "f32", "f8E4M3FN", "f8E5M2"}   # fp8 computes in f32 too (fp8_fallback.py)
    return ta.element_type == tb.element_type or {str(ta.element_type), str(tb.element_type)} <= floats \
        or _converts(a, b) or _converts(b, a)


def _converts(a: ir.Value, b: ir.Value) -> bool:
    """Is `a` a cast of `b`? The kernel converts the value it computes (an integer to its float, a float
    rounded and saturated to an integer: quantize's i8 store, dequantize's load), so the two share a kernel
    whatever their types: each op keeps computing in its own type (kernelgen.elementwise)."""
    owner = a.owner
    return isinstance(owner, ir.OpView) and owner.operation.name == "ttensor.cast" and owner.operands[0] == b


def _step_name(op) -> str:
    name = op.operation.name
    if name == "ttensor.bias_add":
        return "bias"
    if name == "ttensor.cast":
        return "cast"
    if name == "ttensor.unary":
        return ir.StringAttr(op.attributes["fn"]).value
    fn = ir.StringAttr(op.attributes["fn"]).value
    if fn == "mul":
        if any(is_scalar_constant(o) for o in op.operands):
            return "scale"
        found = next(filter(None, map(gelu_derivative, op.operands)), None)
        return found[0] if found else "scale_by"
    return "sub_from" if fn == "sub" else "residual"


def _check_requested_epilogue(fn) -> None:
    """`@function(epilogue=[bias, gelu])`: every matmul must end up with exactly those steps fused."""
    if "tessera.hints" not in fn.attributes or "epilogue" not in ir.DictAttr(fn.attributes["tessera.hints"]):
        return
    want = [ir.StringAttr(a).value for a in ir.ArrayAttr(ir.DictAttr(fn.attributes["tessera.hints"])["epilogue"])]
    groups: dict[int, list] = {}
    for op in graph_ops(fn):
        if "tessera.group_kind" in op.attributes and ir.StringAttr(op.attributes["tessera.group_kind"]).value == "gemm":
            groups.setdefault(ir.IntegerAttr(op.attributes["tessera.group"]).value, []).append(op)
    if not groups:
        raise LoweringError(fn, f"epilogue={want} was requested but the function has no matmul")
    for ops in groups.values():
        got = [_step_name(op) for op in ops[1:]]
        if got != want:
            raise LoweringError(ops[0], f"epilogue={want} was requested but this matmul's fused epilogue is "
                                        f"{got} (the ops after it must be exactly those steps, each used only "
                                        f"by the next)")

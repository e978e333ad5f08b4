"""The memory policy of reverse-mode derivatives: which forward values the backward reads as saved and which
it recomputes (used by passes/autodiff.py).

By default every value a backward rule reads is the forward copy's own value: saved, alive from the forward
op that makes it to the last backward rule that reads it, so that the memory phase cannot reuse its buffer
in between. A call of an `@function(checkpoint=True)` (`tessera.checkpoint`) is a checkpointed region: its
operands and results stay saved (the forward needs them anyway, and the ops after the call read them), but
the values made inside it are recomputed where the backward first needs them. The rule of an op inside the
region is given a copy of the op whose operands are recomputed (`Recompute.op`), each recomputed value being
a copy of its op made on first demand, right before the rule that reads it, from saved values and other
recomputed ones. The forward's own values inside the region then die within the forward, and their buffers
are reused by what comes after; only one region's values are alive again at a time in the backward.

A copy carries `tessera.recompute` (the region's number): the attribute makes it differ from the op it
copies, so that `cse`, which runs after the pass, does not merge the two again. Copies nothing reads in the
end (an op whose rule reads only its operands) are erased once the derivative is written.

Everything outside checkpointed regions is saved: what to recompute is the user's choice, as with
`jax.checkpoint`. Cheap elementwise residuals need no automatic policy to stay out of memory: fusion puts
the backward's elementwise ops that read them into the epilogue of the GEMM whose result they are, or into
one elementwise kernel (docs/language.md, Derivatives).
"""

from __future__ import annotations

from ..mlir import ir


class Recompute:
    """The checkpointed regions of a derivative's forward copy and the recomputed copies of their values."""

    def __init__(self):
        self.region: dict = {}     # value of the forward copy -> the number of the region making it
        self.copies: dict = {}     # value of the forward copy -> its recomputed value
        self.made: list = []       # the copies, in the order made
        self.count = 0             # regions marked

    def mark(self, ops: list) -> None:
        """`ops` (a call's inlined body) form one more region; an enclosing region, marked after, takes them."""
        n, self.count = self.count, self.count + 1
        for op in ops:
            for r in op.results:   # keyed by value: Operation objects hash by identity, and there are several
                self.region[r] = n

    def _value(self, v, region: int):
        """`v` as the backward of region `region` reads it: recomputed where made inside the region."""
        owner = v.owner
        if isinstance(owner, ir.Block) or self.region.get(v) != region or \
                owner.operation.name == "ttensor.constant":   # constants are literals: nothing to save
            return v
        if v not in self.copies:
            ins = [self._value(o, region) for o in owner.operands]
            attrs = {a: owner.attributes[a] for a in owner.attributes}
            attrs["tessera.recompute"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), region)
            copy = ir.Operation.create(owner.operation.name, results=[r.type for r in owner.results], operands=ins,
                                       attributes=attrs, loc=owner.location)
            self.made.append(copy)
            for r, c in zip(owner.results, copy.results):
                self.copies[r] = c
        return self.copies[v]

    def op(self, op):
        """The op whose rule the backward emits next: a copy reading recomputed operands (and giving
        recomputed results) where `op` is inside a region, else `op` itself."""
        region = self.region.get(op.results[0]) if len(op.results) == 1 else None
        if region is None:
            return op
        self._value(op.results[0], region)
        return self.copies[op.results[0]].owner.operation.opview

    def erase_unread(self) -> None:
        for copy in reversed(self.made):
            if all(not list(r.uses) for r in copy.results):
                copy.erase()

# The sm_90a attention's persistent grid (backends/ptx/attention_sm90.py `persistent`), TUNED's at D = 64 causal
# (measured faster there on an H200, with skip_masked=2): a grid of at most 132 CTAs, each looping over query tiles.
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=kernels | FileCheck %s --check-prefix=PLAN
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=ptx > %t.ptx
# RUN: FileCheck %s --check-prefix=PTX < %t.ptx
# RUN: env TESSERA_CACHE=0 TESSERA_SM90_ATTENTION=64:persistent=0 tessera-cc %s --target ptx --arch sm_90a --compile-to=kernels | FileCheck %s --check-prefix=GRID

from tessera import function, op, tensor, bf16


@function
def causal_d64(Q: tensor[bf16, "B", "H", "S", 64], K: tensor[bf16, "B", "H", "T", 64],
               V: tensor[bf16, "B", "H", "T", 64]) -> tensor[bf16, "B", "H", "S", 64]:
    return op.flash_attention(Q, K, V, causal=True, scale=0.125)

# One CTA a tile up to the SMs (132); with persistent=0 a CTA a tile, (ceil(SQ/192), BH).
# PLAN: \22grid\22: [\22min(ceil(SQ/192)*BH, 132)\22, \221\22, \221\22]
# GRID: \22grid\22: [\22ceil(SQ/192)\22, \22BH\22, \221\22]

# Q's barrier and the three full ones count one arrival; the three empty ones and the Q buffer's release one per
# consumer warpgroup (three).
# PTX-COUNT-4: mbarrier.init.shared::cta.b64 [%r{{[0-9]+}}], 1;
# PTX-COUNT-4: mbarrier.init.shared::cta.b64 [%r{{[0-9]+}}], 3;
# The tiles' ranks from the CTA's index and the grid's size; thread 0 streams K and V, thread 32 (warp 1) loads
# each tile's Q once the consumers have released the buffer.
# PTX:         mov.u32 %r{{[0-9]+}}, %nctaid.x;
# PTX:         setp.ne.b32 %p{{[0-9]+}}, %r{{[0-9]+}}, 32;
# PTX:         mbarrier.try_wait.parity
# PTX:         cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes

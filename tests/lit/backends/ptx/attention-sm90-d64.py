# Flash attention at head dimension 64 on sm_90a takes FlashAttention-3's 192 x 128 tiles (backends/ptx/
# attention_sm90.py, TUNED): three consumer warpgroups of 64 query rows beside the TMA producer.
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=kernels | FileCheck %s --check-prefix=KERNELS
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=ptx > %t.ptx
# RUN: FileCheck %s --check-prefix=PTX < %t.ptx
# RUN: FileCheck %s --check-prefix=TURNS < %t.ptx
# RUN: env TESSERA_CACHE=0 TESSERA_SM90_ATTENTION=64:persistent=0 tessera-cc %s --target ptx --arch sm_90a --compile-to=ptx > %t.grid.ptx
# RUN: FileCheck %s --check-prefix=TILES < %t.grid.ptx
# RUN: FileCheck %s --check-prefix=SKIP < %t.ptx

from tessera import function, op, tensor, bf16


@function
def causal_d64(Q: tensor[bf16, "B", "H", "S", 64], K: tensor[bf16, "B", "H", "T", 64],
               V: tensor[bf16, "B", "H", "T", 64]) -> tensor[bf16, "B", "H", "S", 64]:
    return op.flash_attention(Q, K, V, causal=True, scale=0.125)

# Q's box takes the CTA's 192 rows, K's and V's 128 keys; O leaves 64 rows (a warpgroup's) a box.
# KERNELS-LABEL: func.func private @causal_d64__attention0(
# KERNELS-SAME:    ptx.tensor_maps = "Q:0:64x192x1:128;K:1:64x128x1:128;V:2:64x128x1:128;O:3:64x64x1:128"
# KERNELS-SAME:    tile.K = "64", tile.M = "192", tile.N = "128"

# 512 threads; Q's barrier and the three full barriers count one arrival, the three empty ones one per
# consumer warpgroup (three); the consumers take 160 registers a thread, the producer keeps 24.
# PTX:          .maxntid 512
# PTX-COUNT-4:  mbarrier.init.shared::cta.b64 [%r{{[0-9]+}}], 1;
# PTX-COUNT-3:  mbarrier.init.shared::cta.b64 [%r{{[0-9]+}}], 3;
# PTX:          setmaxnreg.inc.sync.aligned.u32 160;
# S = Q·Kᵀ in four k16 steps of m64n128 (the first with scale-d false) …
# PTX:          setp.ne.b32 p, %r{{[0-9]+}}, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
# PTX-COUNT-3:  wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, 1, 1, 1, 0, 0;
# … and P·V in eight k16 steps of m64n64, P's fragments in registers.
# PTX-COUNT-8:  wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %rd{{[0-9]+}}, 1, 1, 1, 1;
# PTX:          setmaxnreg.dec.sync.aligned.u32 24;

# The turns go round the three consumers on named barriers of two warpgroups (256 threads): the last one
# hands the first turn over; each takes its own, issues its products and gives the next one's.
# TURNS:     @p bar.arrive %r{{[0-9]+}}, 256;
# TURNS:     bar.sync %r{{[0-9]+}}, 256;
# TURNS:     wgmma.mma_async
# TURNS:     bar.arrive %r{{[0-9]+}}, 256;

# Causal tiles end at the last row (attention_sm90's end_tiles, TUNED's), shown with a CTA a tile (persistent=0;
# TUNED's persistent grid at D = 64 causal, attention-sm90-persistent.py, takes x from the tile's rank): tile x
# starts at SQ - (x + 1)·192,
# clamped to row 0 (the short tile is the first rows', never a negative row), and needs
# ceil((m0 + 192) / 128) key blocks; with tiles from row 0 (end_tiles=0) there is no max.s32 here.
# TILES:      mov.u32 [[X:%r[0-9]+]], %ctaid.x;
# TILES:      mad.lo.s32 [[T:%r[0-9]+]], [[X]], -192, %r{{[0-9]+}};
# TILES-NEXT: add.s32 [[U:%r[0-9]+]], [[T]], -192;
# TILES-NEXT: max.s32 [[M0:%r[0-9]+]], [[U]], 0;
# TILES:      add.s32 [[N:%r[0-9]+]], [[M0]], 319;
# TILES-NEXT: shr.u32 %r{{[0-9]+}}, [[N]], 7;

# Each consumer warpgroup stops at its own rows' last key block (attention_sm90's skip_masked=2, TUNED's at D = 64):
# ceil((m0 + 64c + 64) / 128) blocks, the count taken from lane 0 (the same in every lane, as ptxas then knows).
# (tests/unit/test_ptx_attention.py checks the IR's count → shuffle → loop bound)
# SKIP:      shfl.sync.idx.b32 %r{{[0-9]+}}, %r{{[0-9]+}}, 0, 31, -1;

# Graph IR flash_attention_fp8 on sm_90a (bf16, head dimension 128) becomes four generated kernels
# (backends/ptx/attention_fp8_sm90.py): partial amaxes, Q and K quantized to e4m3, V quantized into its permuted
# transpose, and the e4m3 attention; f16 takes the fallback (dequantized e4m3 through flash_attention).
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=kernels | FileCheck %s --check-prefix=KERNELS
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=ptx > %t.ptx
# RUN: FileCheck %s --check-prefix=QUANT < %t.ptx
# RUN: FileCheck %s --check-prefix=ATTN < %t.ptx
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=schedule | FileCheck %s --check-prefix=FALLBACK

from tessera import function, op, tensor, bf16, f16


@function
def fp8(Q: tensor[bf16, "B", "H", "S", 128], K: tensor[bf16, "B", "H", "T", 128],
        V: tensor[bf16, "B", "H", "T", 128]) -> tensor[bf16, "B", "H", "S", 128]:
    return op.flash_attention_fp8(Q, K, V, causal=True)


@function
def half(Q: tensor[f16, "S", 128], K: tensor[f16, "T", 128], V: tensor[f16, "T", 128]) -> tensor[f16, "S", 128]:
    return op.flash_attention_fp8(Q, K, V)

# The one-byte tensors, partials and descales are plan intermediates; V's transpose is [BH, 128, SKP].
# KERNELS-LABEL: func.func private @fp8__attention_fp80_amax(
# KERNELS-SAME:    {tessera.dims = ["NQ"], tessera.name = "Q"}
# KERNELS-SAME:    {tessera.dims = [768], tessera.name = "P"}
# KERNELS-LABEL: func.func private @fp8__attention_fp80_quant(
# KERNELS-SAME:    memref<?xi8> {tessera.dims = ["NQ"], tessera.name = "Q8"}
# KERNELS-SAME:    memref<?xf32> {tessera.dims = [3], tessera.name = "DS"}
# KERNELS-SAME:    tessera.writes = array<i64: 2, 3, 5>
# KERNELS-LABEL: func.func private @fp8__attention_fp80_vt(
# KERNELS-SAME:    memref<?x?x?xi8> {tessera.dims = ["BH", 128, "SKP"], tessera.name = "VT"}
# KERNELS-LABEL: func.func private @fp8__attention_fp80(
# KERNELS-SAME:    memref<?x?x?xi8> {tessera.dims = ["BH", "SQ", 128], tessera.name = "Q8"}
# KERNELS-SAME:    memref<?x?x?xbf16> {tessera.dims = ["BH", "SQ", 128], tessera.name = "O"}
# KERNELS-SAME:    attention.causal = "true", attention.fp8 = "e4m3"
# KERNELS-SAME:    ptx.tensor_maps = "Q:0:128x128x1:128;K:1:128x128x1:128;V:2:128x128x1:128;O:3:64x64x1:128"

# Quantizing: an f32 division by the scale (one rounding), then e4m3's rounding, saturated, two at a time. The
# Vt kernel loads its 16 bf16 elements (two 16-byte loads) before reducing the amax partials to V's scale.
# QUANT-LABEL: .visible .entry fp8__attention_fp80_quant(
# QUANT:       div.rn.f32
# QUANT:       cvt.rn.satfinite.e4m3x2.f32
# QUANT-LABEL: .visible .entry fp8__attention_fp80_vt(
# QUANT-COUNT-2: ld.global.v4.b32
# QUANT-NOT:   div.rn.f32
# QUANT:       shfl.sync.bfly.b32
# QUANT:       div.rn.f32
# QUANT:       bar.sync 0;
# QUANT:       st.global.v4.b32

# The attention: S and P·V on the e4m3 tensor cores, P rounded to e4m3 in registers as P·V's A operand.
# ATTN-LABEL: .visible .entry fp8__attention_fp80(
# ATTN:       .maxntid 384
# ATTN:       wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {{.*}}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, p, 1, 1;
# ATTN:       ex2.approx.ftz.f32
# ATTN:       cvt.rn.satfinite.e4m3x2.f32
# ATTN:       wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {{.*}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %rd{{[0-9]+}}, 1, 1, 1;

# f16: no kernel writes it, so the fallback: amax, quantize, dequantize, then flash_attention.
# FALLBACK-LABEL: func.func @half(
# FALLBACK-SAME:    tessera.fallbacks = ["flash_attention_fp8 (f16, head dimension 128) as flash_attention of its dequantized e4m3 Q, K, V (P not rounded to e4m3)"
# FALLBACK-NOT:   ttensor.flash_attention_fp8

# Graph IR flash_attention_fp8 with descales (e4m3 Q, K, V, f32 0-d sq, sk, sv; issue 17 item 1) on sm_90a: the
# caller's one-byte tensors go straight to the e4m3 kernel, no amax and no quantize kernel, no f16 container
# and no rounding kernel; one kernel moves V's bytes into the permuted transpose Vt (the kernel reads Vt) and
# the three descales into DS. Head dimension 64 has no kernel: the fallback (dequantized to bf16, recorded).
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=kernels | FileCheck %s --check-prefix=KERNELS
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=ptx | FileCheck %s --check-prefix=PTX
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=schedule | FileCheck %s --check-prefix=FALLBACK

from tessera import function, op, tensor, bf16, f32, fp8_e4m3


@function
def pre(Q: tensor[fp8_e4m3, "B", "S", 128], K: tensor[fp8_e4m3, "B", "T", 128], V: tensor[fp8_e4m3, "B", "T", 128],
        sq: tensor[f32], sk: tensor[f32], sv: tensor[f32]) -> tensor[bf16, "B", "S", 128]:
    return op.flash_attention_fp8(Q, K, V, scale=(sq, sk, sv), causal=True)


@function
def small(Q: tensor[fp8_e4m3, "S", 64], K: tensor[fp8_e4m3, "T", 64], V: tensor[fp8_e4m3, "T", 64],
          sq: tensor[f32], sk: tensor[f32], sv: tensor[f32]) -> tensor[bf16, "S", 64]:
    return op.flash_attention_fp8(Q, K, V, scale=(sq, sk, sv))

# Two kernels: Vt (with the descales) and the attention, which reads the caller's Q and K bytes.
# KERNELS-NOT:     _amax(
# KERNELS-NOT:     _quant(
# KERNELS-LABEL: func.func private @pre__attention_fp80_vt8(
# KERNELS-SAME:    memref<?x?x?xf8E4M3FN> {tessera.dims = ["BH", "SK", 128], tessera.name = "V8"}
# KERNELS-SAME:    memref<f32> {tessera.dims = [], tessera.name = "SCQ"}
# KERNELS-SAME:    memref<?x?x?xi8> {tessera.dims = ["BH", 128, "SKP"], tessera.name = "VT"}
# KERNELS-SAME:    memref<?xf32> {tessera.dims = [3], tessera.name = "DS"}
# KERNELS-SAME:    tessera.writes = array<i64: 4, 5>
# KERNELS-LABEL: func.func private @pre__attention_fp80(
# KERNELS-SAME:    memref<?x?x?xf8E4M3FN> {tessera.dims = ["BH", "SQ", 128], tessera.name = "Q8"}
# KERNELS-SAME:    memref<?x?x?xbf16> {tessera.dims = ["BH", "SQ", 128], tessera.name = "O"}
# KERNELS-SAME:    attention.causal = "true", attention.fp8 = "e4m3"
# KERNELS-NOT:     _amax(
# KERNELS-NOT:     _quant(

# The Vt kernel moves bytes: one 16-byte load, no division, no conversion; the attention multiplies e4m3.
# PTX-NOT:       .entry pre__attention_fp80_amax(
# PTX-NOT:       .entry pre__attention_fp80_quant(
# PTX-LABEL: .visible .entry pre__attention_fp80_vt8(
# PTX-NOT:       div.rn.f32
# PTX-NOT:       cvt.rn.satfinite
# PTX:           ld.global.v4.{{[bu]}}32
# PTX:           bar.sync 0;
# PTX:           st.global.v4.b32
# PTX-LABEL: .visible .entry pre__attention_fp80(
# PTX:           wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3

# FALLBACK-LABEL: func.func @pre(
# FALLBACK-NOT:     tessera.fallbacks
# FALLBACK:         ttensor.flash_attention_fp8
# FALLBACK-LABEL: func.func @small(
# FALLBACK-SAME:    tessera.fallbacks = ["flash_attention_fp8 (e4m3 with descales, head dimension 64) as flash_attention of its Q, K, V dequantized to bf16 (P not rounded to e4m3)"
# FALLBACK-NOT:   ttensor.flash_attention_fp8

# tile.fft, the FFT tile primitive (spec Part V): numpy.fft.fft of a tile's rows as (re, im). A power of two:
# the Stockham FFT's stages (ttensor.fft_stage, as op.fft's), the inverse's last stage scaled by 1/n; other sizes:
# GEMMs with the DFT's twiddle matrices, scaled by √n (the inverse: the conjugate's, over √n).
# RUN: tessera-cc %s --compile-to=ttir | FileCheck %s

from tessera import f32, kernel, tensor, tile


# CHECK-LABEL: func.func @spectrum(
# CHECK:         %[[C:.+]] = "ttensor.twiddle"() {part = "cos"} : () -> tensor<12x12xf32>
# CHECK:         %[[S:.+]] = "ttensor.twiddle"() {part = "sin"} : () -> tensor<12x12xf32>
# CHECK:         %[[XC:.+]] = "ttensor.matmul"(%arg0, %[[C]]) {accum = f32}
# CHECK:         %[[XS:.+]] = "ttensor.matmul"(%arg0, %[[S]]) {accum = f32}
# CHECK:         %[[NEG:.+]] = "ttensor.binary"(%[[XS]], %{{.+}}) {fn = "mul"}
# CHECK:         %[[RE:.+]] = "ttensor.binary"(%[[XC]], %{{.+}}) {fn = "mul"}
# CHECK:         %[[IM:.+]] = "ttensor.binary"(%[[NEG]], %{{.+}}) {fn = "mul"}
# CHECK:         return %[[RE]], %[[IM]]
@kernel
def spectrum(X: tensor[f32, 8, 12], Re: tensor[f32, 8, 12], Im: tensor[f32, 8, 12]):
    re, im = tile.fft(X)
    Re[:] = re
    Im[:] = im


# The inverse of a (re, im) pair, n = 16: two radix-4 stages reading the parts as columns [4, 16, 1], the last
# scaled by 1/16 and writing pairs, whose real part is the result.
# CHECK-LABEL: func.func @inverse(
# CHECK:         %[[R:.+]] = "ttensor.reshape"(%arg0) : (tensor<4x16xf32>) -> tensor<4x16x1xf32>
# CHECK:         %[[I:.+]] = "ttensor.reshape"(%arg1) : (tensor<4x16xf32>) -> tensor<4x16x1xf32>
# CHECK:         %[[S1:.+]] = "ttensor.fft_stage"(%[[R]], %[[I]]) {input_layout = "parts", inverse = true, {{.*}}output_layout = "planes", radix = 4 : i64, scale = 1.000000e+00 : f64, stride = 1 : i64} : (tensor<4x16x1xf32>, tensor<4x16x1xf32>) -> tensor<2x4x16x1xf32>
# CHECK:         %[[S2:.+]] = "ttensor.fft_stage"(%[[S1]]) {input_layout = "planes", inverse = true, {{.*}}output_layout = "pairs", radix = 4 : i64, scale = 6.250000e-02 : f64, stride = 4 : i64} : (tensor<2x4x16x1xf32>) -> tensor<4x16x1x2xf32>
# CHECK:         %[[P:.+]] = "ttensor.part"(%[[S2]]) {part = "re"} : (tensor<4x16x1x2xf32>) -> tensor<4x16x1xf32>
# CHECK:         %[[X:.+]] = "ttensor.reshape"(%[[P]]) : (tensor<4x16x1xf32>) -> tensor<4x16xf32>
# CHECK-NOT:     "ttensor.twiddle"
# CHECK-NOT:     "ttensor.matmul"
# CHECK:         return %[[X]]
@kernel
def inverse(Re: tensor[f32, 4, 16], Im: tensor[f32, 4, 16], Out: tensor[f32, 4, 16]):
    x, _ = tile.fft(Re, Im, inverse=True)
    Out[:] = x


# f64, n = 8: a radix-4 stage, then a radix-2 one (log2 8 odd), unscaled (the forward transform).
# CHECK-LABEL: func.func @forward64(
# CHECK:         "ttensor.fft_stage"({{.*}}radix = 4 : i64, scale = 1.000000e+00 : f64, stride = 1 : i64} : (tensor<2x8x1xf64>) -> tensor<2x2x8x1xf64>
# CHECK:         "ttensor.fft_stage"({{.*}}radix = 2 : i64, scale = 1.000000e+00 : f64, stride = 4 : i64} : (tensor<2x2x8x1xf64>) -> tensor<2x8x1x2xf64>
@kernel
def forward64(X: tensor[f64, 2, 8], Re: tensor[f64, 2, 8]):
    re, _ = tile.fft(X)
    Re[:] = re


# A transform of a transform's parts reads the first one's pairs [..., n, 1, 2] (no reshape of its parts): n = 4,
# one radix-4 stage each.
# CHECK-LABEL: func.func @roundtrip(
# CHECK:         %[[F:.+]] = "ttensor.fft_stage"({{.*}}inverse = false{{.*}}) -> tensor<3x4x1x2xf32>
# CHECK:         "ttensor.fft_stage"(%[[F]]) {input_layout = "pairs", inverse = true, {{.*}}scale = 2.500000e-01 : f64, stride = 1 : i64} : (tensor<3x4x1x2xf32>) -> tensor<3x4x1x2xf32>
@kernel
def roundtrip(X: tensor[f32, 3, 4], Out: tensor[f32, 3, 4]):
    re, im = tile.fft(X)
    x, _ = tile.fft(re, im, inverse=True)
    Out[:] = x

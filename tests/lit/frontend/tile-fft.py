# tile.fft, the FFT tile primitive (spec Part V): numpy.fft.fft of a tile's rows as (re, im), GEMMs with the
# DFT's twiddle matrices, scaled by √n (the inverse: the conjugate's, over √n).
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


# The inverse of a (re, im) pair: four GEMMs, Re = C·re − S·im, Im = C·im + S·re, over √n.
# CHECK-LABEL: func.func @inverse(
# CHECK-COUNT-2: "ttensor.twiddle"
# CHECK-COUNT-2: "ttensor.matmul"
# CHECK:         "ttensor.binary"({{.+}}) {fn = "sub"}
# CHECK-COUNT-2: "ttensor.matmul"
# CHECK:         "ttensor.binary"({{.+}}) {fn = "add"}
@kernel
def inverse(Re: tensor[f32, 4, 16], Im: tensor[f32, 4, 16], Out: tensor[f32, 4, 16]):
    x, _ = tile.fft(Re, Im, inverse=True)
    Out[:] = x

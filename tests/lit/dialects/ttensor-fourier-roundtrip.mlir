// ttensor.twiddle, ttensor.interleave, ttensor.part and reshape's complex views print and parse back.
// RUN: tessera-opt %s | tessera-opt | FileCheck %s

// CHECK-LABEL: func.func @fourier
// CHECK:         "ttensor.twiddle"() {part = "cos"} : () -> tensor<8x8xf32>
// CHECK:         "ttensor.twiddle"() {part = "sin"} : () -> tensor<8x8xf64>
// CHECK:         "ttensor.interleave"(%{{.+}}, %{{.+}}) : (tensor<8x1xf32>, tensor<8x1xf32>) -> tensor<8x1x2xf32>
// CHECK:         "ttensor.reshape"(%{{.+}}) : (tensor<8x1x2xf32>) -> tensor<8x1xcomplex<f32>>
// CHECK:         "ttensor.reshape"(%{{.+}}) : (tensor<8x1xcomplex<f32>>) -> tensor<16xf32>
// CHECK:         "ttensor.part"(%{{.+}}) {part = "im"} : (tensor<8x1x2xf32>) -> tensor<8x1xf32>
func.func @fourier(%re: tensor<8x1xf32>, %im: tensor<8x1xf32>) -> tensor<16xf32> {
  %c = "ttensor.twiddle"() {part = "cos"} : () -> tensor<8x8xf32>
  %s = "ttensor.twiddle"() {part = "sin"} : () -> tensor<8x8xf64>
  %p = "ttensor.interleave"(%re, %im) : (tensor<8x1xf32>, tensor<8x1xf32>) -> tensor<8x1x2xf32>
  %z = "ttensor.reshape"(%p) : (tensor<8x1x2xf32>) -> tensor<8x1xcomplex<f32>>
  %b = "ttensor.reshape"(%z) : (tensor<8x1xcomplex<f32>>) -> tensor<16xf32>
  %i = "ttensor.part"(%p) {part = "im"} : (tensor<8x1x2xf32>) -> tensor<8x1xf32>
  return %b : tensor<16xf32>
}

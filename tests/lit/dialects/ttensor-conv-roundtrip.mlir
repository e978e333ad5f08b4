// ttensor.conv, ttensor.im2col and ttensor.col2im print and parse back unchanged.
// RUN: tessera-opt %s | tessera-opt | FileCheck %s

// CHECK-LABEL: func.func @conv2d
func.func @conv2d(%x: tensor<?x3x10x9xf32>, %w: tensor<4x3x3x2xf32>) -> tensor<?x4x6x7xf32> {
  // CHECK: "ttensor.conv"(%{{.*}}, %{{.*}}) {dilation = [1, 2], padding = [1, 2, 0, 0], stride = [2, 1]} : (tensor<?x3x10x9xf32>, tensor<4x3x3x2xf32>) -> tensor<?x4x6x7xf32>
  %r = "ttensor.conv"(%x, %w) {stride = [2, 1], padding = [1, 2, 0, 0], dilation = [1, 2]} : (tensor<?x3x10x9xf32>, tensor<4x3x3x2xf32>) -> tensor<?x4x6x7xf32>
  return %r : tensor<?x4x6x7xf32>
}

// CHECK-LABEL: func.func @conv1d_im2col
func.func @conv1d_im2col(%x: tensor<2x3x11xbf16>) -> tensor<22x12xbf16> {
  // CHECK: "ttensor.im2col"(%{{.*}}) {circular = false, dilation = [2], flip = false, kernel = [4], padding = [3, 3], stride = [1]} : (tensor<2x3x11xbf16>) -> tensor<22x12xbf16>
  %r = "ttensor.im2col"(%x) {circular = false, flip = false, kernel = [4], stride = [1], padding = [3, 3], dilation = [2]} : (tensor<2x3x11xbf16>) -> tensor<22x12xbf16>
  return %r : tensor<22x12xbf16>
}

// CHECK-LABEL: func.func @col2im
func.func @col2im(%p: tensor<?x12xf32>, %x: tensor<?x3x11xf32>) -> tensor<?x3x11xf32> {
  // CHECK: "ttensor.col2im"(%{{.*}}, %{{.*}}) {dilation = [2], kernel = [4], padding = [3, 3], stride = [1]} : (tensor<?x12xf32>, tensor<?x3x11xf32>) -> tensor<?x3x11xf32>
  %r = "ttensor.col2im"(%p, %x) {kernel = [4], stride = [1], padding = [3, 3], dilation = [2]} : (tensor<?x12xf32>, tensor<?x3x11xf32>) -> tensor<?x3x11xf32>
  return %r : tensor<?x3x11xf32>
}

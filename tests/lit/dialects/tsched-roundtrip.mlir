// Every tsched op parses, prints and parses again to the same IR.
// RUN: tessera-opt %s | tessera-opt | FileCheck %s

// A GEMM tile with every scheduling attribute: loader and compute warps share a 3-stage K loop that
// accumulates A[:, k:k+64] @ B[k:k+64, :].
// CHECK-LABEL: func.func @gemm_tile
// CHECK-SAME:    (%[[A:.+]]: tensor<256x512xbf16>, %[[B:.+]]: tensor<512x256xbf16>, %[[ACC:.+]]: tensor<256x256xf32>, %[[K:.+]]: index)
func.func @gemm_tile(%a: tensor<256x512xbf16>, %b: tensor<512x256xbf16>, %acc: tensor<256x256xf32>,
                     %k: index) -> tensor<256x256xf32> {
  // CHECK:      %[[T:.+]] = "tsched.tile"() ({
  %0 = "tsched.tile"() ({
    // CHECK:      %[[WS:.+]] = "tsched.warp_specialize"() ({
    %1 = "tsched.warp_specialize"() ({
      // CHECK:      %[[C0:.+]] = arith.constant 0 : index
      // CHECK:      %[[C64:.+]] = arith.constant 64 : index
      %c0 = arith.constant 0 : index
      %c64 = arith.constant 64 : index
      // CHECK:      %[[P:.+]] = "tsched.pipeline"(%[[C0]], %[[K]], %[[C64]], %[[ACC]]) ({
      // CHECK-NEXT: ^bb0(%[[IV:.+]]: index, %[[X:.+]]: tensor<256x256xf32>):
      %2 = "tsched.pipeline"(%c0, %k, %c64, %acc) ({
      ^bb0(%iv: index, %x: tensor<256x256xf32>):
        // CHECK:      %[[AK:.+]] = tensor.extract_slice %[[A]][0, %[[IV]]] [256, 64] [1, 1]
        // CHECK:      %[[BK:.+]] = tensor.extract_slice %[[B]][%[[IV]], 0] [64, 256] [1, 1]
        // CHECK:      %[[D:.+]] = "ttensor.matmul"(%[[AK]], %[[BK]])
        // CHECK:      %[[SUM:.+]] = "ttensor.binary"(%[[X]], %[[D]]) {fn = "add"}
        // CHECK:      "tsched.yield"(%[[SUM]]) : (tensor<256x256xf32>) -> ()
        %ak = tensor.extract_slice %a[0, %iv] [256, 64] [1, 1] : tensor<256x512xbf16> to tensor<256x64xbf16>
        %bk = tensor.extract_slice %b[%iv, 0] [64, 256] [1, 1] : tensor<512x256xbf16> to tensor<64x256xbf16>
        %d = "ttensor.matmul"(%ak, %bk) {accum = f32} : (tensor<256x64xbf16>, tensor<64x256xbf16>) -> tensor<256x256xf32>
        %sum = "ttensor.binary"(%x, %d) {fn = "add"} : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
        "tsched.yield"(%sum) : (tensor<256x256xf32>) -> ()
      // CHECK:      }) {stages = 3 : i64} : (index, index, index, tensor<256x256xf32>) -> tensor<256x256xf32>
      }) {stages = 3 : i64} : (index, index, index, tensor<256x256xf32>) -> tensor<256x256xf32>
      // CHECK:      "tsched.yield"(%[[P]]) : (tensor<256x256xf32>) -> ()
      "tsched.yield"(%2) : (tensor<256x256xf32>) -> ()
    // CHECK:      }) {consumer_warps = 4 : i64, producer_warps = 4 : i64} : () -> tensor<256x256xf32>
    }) {producer_warps = 4 : i64, consumer_warps = 4 : i64} : () -> tensor<256x256xf32>
    // CHECK:      "tsched.yield"(%[[WS]]) : (tensor<256x256xf32>) -> ()
    "tsched.yield"(%1) : (tensor<256x256xf32>) -> ()
  // CHECK:      }) {epilogue = ["bias", "gelu", "scale"], pipeline.stages = 3 : i64, swizzle = 8 : i64,
  // CHECK-SAME:     tile.shape = [128, 128, 64], vector = 128 : i64, warps = 8 : i64} : () -> tensor<256x256xf32>
  }) {tile.shape = [128, 128, 64], pipeline.stages = 3, warps = 8, vector = 128, swizzle = 8,
      epilogue = ["bias", "gelu", "scale"]} : () -> tensor<256x256xf32>
  // CHECK:      return %[[T]]
  return %0 : tensor<256x256xf32>
}

// A tile that needs only its shape; a fusion group around softmax and dropout.
// CHECK-LABEL: func.func @fused_softmax
// CHECK-SAME:    (%[[S:.+]]: tensor<64x128xf32>)
func.func @fused_softmax(%s: tensor<64x128xf32>) -> tensor<64x128xf32> {
  // CHECK: "tsched.tile"() ({
  %0 = "tsched.tile"() ({
    // CHECK: %[[G:.+]] = "tsched.fusion_group"() ({
    %1 = "tsched.fusion_group"() ({
      // CHECK: %[[P:.+]] = "ttensor.softmax"(%[[S]])
      %p = "ttensor.softmax"(%s) {axis = -1 : i64} : (tensor<64x128xf32>) -> tensor<64x128xf32>
      // CHECK: %[[D:.+]] = "ttensor.dropout"(%[[P]])
      %d = "ttensor.dropout"(%p) {p = 0.1 : f64, seed = 7 : i64, offset = 0 : i64} : (tensor<64x128xf32>) -> tensor<64x128xf32>
      // CHECK: "tsched.yield"(%[[D]]) : (tensor<64x128xf32>) -> ()
      "tsched.yield"(%d) : (tensor<64x128xf32>) -> ()
    // CHECK: }) : () -> tensor<64x128xf32>
    }) : () -> tensor<64x128xf32>
    // CHECK: "tsched.yield"(%[[G]])
    "tsched.yield"(%1) : (tensor<64x128xf32>) -> ()
  // CHECK: }) {tile.shape = [64, 128]} : () -> tensor<64x128xf32>
  }) {tile.shape = [64, 128]} : () -> tensor<64x128xf32>
  return %0 : tensor<64x128xf32>
}

// After bufferization a body yields nothing and a pipeline carries nothing.
// CHECK-LABEL: func.func @bufferized
// CHECK-SAME:    (%[[N:.+]]: index, %[[STEP:.+]]: index)
func.func @bufferized(%n: index, %step: index) {
  // CHECK: "tsched.tile"() ({
  "tsched.tile"() ({
    %c0 = arith.constant 0 : index
    // CHECK: "tsched.pipeline"(%{{.+}}, %[[N]], %[[STEP]]) ({
    // CHECK-NEXT: ^bb0(%{{.+}}: index):
    "tsched.pipeline"(%c0, %n, %step) ({
    ^bb0(%iv: index):
      // CHECK-NEXT: "tsched.yield"() : () -> ()
      "tsched.yield"() : () -> ()
    // CHECK: }) {stages = 2 : i64} : (index, index, index) -> ()
    }) {stages = 2 : i64} : (index, index, index) -> ()
    "tsched.yield"() : () -> ()
  // CHECK: }) {tile.shape = [256]} : () -> ()
  }) {tile.shape = [256]} : () -> ()
  return
}

// The Graph IR phases' form: the decisions about an op stand right before it (tmem's after tsched's).
// CHECK-LABEL: func.func @decisions
func.func @decisions(%a: tensor<?x64xf32>, %b: tensor<64x64xf32>) -> tensor<?x64xf32> {
  // CHECK:      "tsched.schedule"() {KC = 64 : i64, MB = 266 : i64, NC = 64 : i64, at_launch = 1 : i64, lanes = 8 : i64, stages = 2 : i64, warp = 32 : i64} : () -> ()
  // CHECK-NEXT: "tmem.stage"() {buffer = "b_panel", copies = 2 : i64, shape = [64, 64]} : () -> ()
  // CHECK-NEXT: "tmem.slot"() {slot = 0 : i64} : () -> ()
  // CHECK-NEXT: "ttensor.matmul"
  "tsched.schedule"() {KC = 64, MB = 266, NC = 64, at_launch = 1, lanes = 8, stages = 2, warp = 32} : () -> ()
  "tmem.stage"() {buffer = "b_panel", copies = 2, shape = [64, 64]} : () -> ()
  "tmem.slot"() {slot = 0} : () -> ()
  %0 = "ttensor.matmul"(%a, %b) {accum = f32} : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  // CHECK:      "tsched.schedule"() {block_x = 128 : i64} : () -> ()
  // CHECK-NEXT: "ttensor.unary"
  "tsched.schedule"() {block_x = 128} : () -> ()
  %1 = "ttensor.unary"(%0) {fn = "relu"} : (tensor<?x64xf32>) -> tensor<?x64xf32>
  return %1 : tensor<?x64xf32>
}

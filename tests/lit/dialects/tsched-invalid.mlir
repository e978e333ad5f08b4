// One case per tsched verifier rule.
// RUN: tessera-opt %s --split-input-file --verify-diagnostics

func.func @tile_without_shape() {
  // expected-error @+1 {{'tsched.tile' needs attribute 'tile.shape' (a list of integers like [16, 8])}}
  "tsched.tile"() ({
    "tsched.yield"() : () -> ()
  }) {warps = 4} : () -> ()
  return
}

// -----

func.func @tile_shape_not_a_list() {
  // expected-error @+1 {{'tsched.tile' attribute 'tile.shape' must be a list of integers like [16, 8], got 128 : i64}}
  "tsched.tile"() ({
    "tsched.yield"() : () -> ()
  }) {tile.shape = 128} : () -> ()
  return
}

// -----

func.func @tile_shape_zero() {
  // expected-error @+1 {{'tsched.tile' tile.shape must be 1 to 3 positive sizes [M, N, K], got [128, 0, 64]}}
  "tsched.tile"() ({
    "tsched.yield"() : () -> ()
  }) {tile.shape = [128, 0, 64]} : () -> ()
  return
}

// -----

func.func @tile_shape_four_sizes() {
  // expected-error @+1 {{'tsched.tile' tile.shape must be 1 to 3 positive sizes [M, N, K], got [8, 8, 8, 8]}}
  "tsched.tile"() ({
    "tsched.yield"() : () -> ()
  }) {tile.shape = [8, 8, 8, 8]} : () -> ()
  return
}

// -----

func.func @tile_stages_out_of_range() {
  // expected-error @+1 {{'tsched.tile' pipeline.stages must be between 1 and 8, got 9}}
  "tsched.tile"() ({
    "tsched.yield"() : () -> ()
  }) {tile.shape = [128, 128, 32], pipeline.stages = 9} : () -> ()
  return
}

// -----

func.func @tile_warps_not_power_of_two() {
  // expected-error @+1 {{'tsched.tile' warps must be a positive power of two, got 6}}
  "tsched.tile"() ({
    "tsched.yield"() : () -> ()
  }) {tile.shape = [128, 128, 32], warps = 6} : () -> ()
  return
}

// -----

func.func @tile_vector_too_narrow() {
  // expected-error @+1 {{'tsched.tile' vector must be a power-of-two number of bits, at least 8, got 4}}
  "tsched.tile"() ({
    "tsched.yield"() : () -> ()
  }) {tile.shape = [128], vector = 4} : () -> ()
  return
}

// -----

func.func @tile_swizzle_zero() {
  // expected-error @+1 {{'tsched.tile' swizzle must be at least 1, got 0}}
  "tsched.tile"() ({
    "tsched.yield"() : () -> ()
  }) {tile.shape = [128, 128, 32], swizzle = 0} : () -> ()
  return
}

// -----

func.func @tile_unknown_epilogue() {
  // expected-error @+1 {{'tsched.tile' epilogue entry 'softplus' is not one of bias, scale, residual, relu, gelu, gelu_tanh, silu, sigmoid, tanh, dropout}}
  "tsched.tile"() ({
    "tsched.yield"() : () -> ()
  }) {tile.shape = [128, 128, 32], epilogue = ["bias", "softplus"]} : () -> ()
  return
}

// -----

func.func @tile_epilogue_not_strings() {
  // expected-error @+1 {{'tsched.tile' attribute 'epilogue' must be a list of strings like ["a", "b"], got [1, 2]}}
  "tsched.tile"() ({
    "tsched.yield"() : () -> ()
  }) {tile.shape = [128, 128, 32], epilogue = [1, 2]} : () -> ()
  return
}

// -----

func.func @body_of_two_blocks() {
  // expected-error @+1 {{'tsched.fusion_group' body must be one block, got 2}}
  "tsched.fusion_group"() ({
    cf.br ^bb1
  ^bb1:
    "tsched.yield"() : () -> ()
  }) : () -> ()
  return
}

// -----

func.func @body_with_arguments() {
  // expected-error @+1 {{'tsched.fusion_group' body must take no arguments (it uses values from above), got (f32)}}
  "tsched.fusion_group"() ({
  ^bb0(%y: f32):
    "tsched.yield"() : () -> ()
  }) : () -> ()
  return
}

// -----

func.func @body_without_yield() {
  // expected-error @+1 {{'tsched.tile' body must end in 'tsched.yield'}}
  "tsched.tile"() ({
    llvm.unreachable
  }) {tile.shape = [128]} : () -> ()
  return
}

// -----

func.func @yield_does_not_match_result(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{'tsched.fusion_group' yields (tensor<4xf32>) but the op's result is (tensor<4xf16>)}}
  %0 = "tsched.fusion_group"() ({
    "tsched.yield"(%x) : (tensor<4xf32>) -> ()
  }) : () -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @no_producer_warps() {
  // expected-error @+1 {{'tsched.warp_specialize' needs at least one warp on each side, got 0 producer and 4 consumer warps}}
  "tsched.warp_specialize"() ({
    "tsched.yield"() : () -> ()
  }) {producer_warps = 0 : i64, consumer_warps = 4 : i64} : () -> ()
  return
}

// -----

func.func @warps_do_not_add_up(%n: index) {
  "tsched.tile"() ({
    // expected-error @+1 {{'tsched.warp_specialize' splits 1 + 4 warps, but the enclosing 'tsched.tile' has warps = 8}}
    "tsched.warp_specialize"() ({
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      "tsched.pipeline"(%c0, %n, %c1) ({
      ^bb0(%iv: index):
        "tsched.yield"() : () -> ()
      }) {stages = 2 : i64} : (index, index, index) -> ()
      "tsched.yield"() : () -> ()
    }) {producer_warps = 1 : i64, consumer_warps = 4 : i64} : () -> ()
    "tsched.yield"() : () -> ()
  }) {tile.shape = [128, 128, 32], warps = 8} : () -> ()
  return
}

// -----

func.func @specialized_without_pipeline() {
  // expected-error @+1 {{'tsched.warp_specialize' body must hold a 'tsched.pipeline' for the producer warps to run ahead in}}
  "tsched.warp_specialize"() ({
    "tsched.yield"() : () -> ()
  }) {producer_warps = 1 : i64, consumer_warps = 4 : i64} : () -> ()
  return
}

// -----

func.func @pipeline_zero_stages(%n: index, %s: index) {
  // expected-error @+1 {{'tsched.pipeline' stages must be between 1 and 8, got 0}}
  "tsched.pipeline"(%n, %n, %s) ({
  ^bb0(%iv: index):
    "tsched.yield"() : () -> ()
  }) {stages = 0 : i64} : (index, index, index) -> ()
  return
}

// -----

func.func @pipeline_deeper_than_tile(%n: index, %s: index) {
  "tsched.tile"() ({
    // expected-error @+1 {{'tsched.pipeline' stages = 4 exceeds the enclosing tile's pipeline.stages = 2, which sizes its buffers}}
    "tsched.pipeline"(%n, %n, %s) ({
    ^bb0(%iv: index):
      "tsched.yield"() : () -> ()
    }) {stages = 4 : i64} : (index, index, index) -> ()
    "tsched.yield"() : () -> ()
  }) {tile.shape = [128, 128, 32], pipeline.stages = 2} : () -> ()
  return
}

// -----

func.func @pipeline_zero_step(%n: index) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'tsched.pipeline' step must be positive, got 0}}
  "tsched.pipeline"(%c0, %n, %c0) ({
  ^bb0(%iv: index):
    "tsched.yield"() : () -> ()
  }) {stages = 2 : i64} : (index, index, index) -> ()
  return
}

// -----

func.func @pipeline_drops_carried_value(%n: index, %acc: tensor<16xf32>) {
  // expected-error @+1 {{'tsched.pipeline' result () must have the type of the carried value (tensor<16xf32>)}}
  "tsched.pipeline"(%n, %n, %n, %acc) ({
  ^bb0(%iv: index, %x: tensor<16xf32>):
    "tsched.yield"(%x) : (tensor<16xf32>) -> ()
  }) {stages = 2 : i64} : (index, index, index, tensor<16xf32>) -> ()
  return
}

// -----

func.func @pipeline_without_index_argument(%n: index, %acc: tensor<16xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{'tsched.pipeline' body arguments (tensor<16xf32>) must be the index and the carried value (index, tensor<16xf32>)}}
  %0 = "tsched.pipeline"(%n, %n, %n, %acc) ({
  ^bb0(%x: tensor<16xf32>):
    "tsched.yield"(%x) : (tensor<16xf32>) -> ()
  }) {stages = 2 : i64} : (index, index, index, tensor<16xf32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

func.func @pipeline_yields_other_type(%n: index, %acc: tensor<16xf32>, %y: tensor<8xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{'tsched.pipeline' yields (tensor<8xf32>) but the carried value is (tensor<16xf32>)}}
  %0 = "tsched.pipeline"(%n, %n, %n, %acc) ({
  ^bb0(%iv: index, %x: tensor<16xf32>):
    "tsched.yield"(%y) : (tensor<8xf32>) -> ()
  }) {stages = 2 : i64} : (index, index, index, tensor<16xf32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

func.func @yield_outside_schedule_op() {
  // expected-error @+1 {{'tsched.yield' must end the body of a tsched region op, not of 'func.func'}}
  "tsched.yield"() : () -> ()
}

// -----

// A wrong operand count reaches IRDL's check, not a Python error in the verifier.
func.func @pipeline_without_step(%n: index) {
  // expected-error @+1 {{op expects at least 3 operands, but got 2}}
  "tsched.pipeline"(%n, %n) ({
  ^bb0(%iv: index):
    "tsched.yield"() : () -> ()
  }) {stages = 2 : i64} : (index, index) -> ()
  return
}

// -----

func.func @schedule_unknown_decision(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'tsched.schedule' has no decision 'threads' (it takes block_x, rows_per_block, MB, NC, KC, MC, MR, NR, stages, at_launch, lanes, warp)}}
  "tsched.schedule"() {threads = 128} : () -> ()
  %0 = "ttensor.unary"(%x) {fn = "relu"} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @schedule_not_an_integer(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'tsched.schedule' attribute 'block_x' must be an integer, got "128"}}
  "tsched.schedule"() {block_x = "128"} : () -> ()
  %0 = "ttensor.unary"(%x) {fn = "relu"} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @schedule_size_zero(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'tsched.schedule' block_x must be positive, got 0}}
  "tsched.schedule"() {block_x = 0} : () -> ()
  %0 = "ttensor.unary"(%x) {fn = "relu"} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @schedule_at_launch_two(%a: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'tsched.schedule' at_launch must be 0 or 1, got 2}}
  "tsched.schedule"() {at_launch = 2} : () -> ()
  %0 = "ttensor.matmul"(%a, %a) {accum = f32} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @schedule_stages_nine(%a: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'tsched.schedule' stages must be between 1 and 8, got 9}}
  "tsched.schedule"() {stages = 9} : () -> ()
  %0 = "ttensor.matmul"(%a, %a) {accum = f32} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @schedule_twice(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'tsched.schedule' is given twice for one op}}
  "tsched.schedule"() {block_x = 128} : () -> ()
  "tsched.schedule"() {block_x = 256} : () -> ()
  %0 = "ttensor.unary"(%x) {fn = "relu"} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @schedule_before_return(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'tsched.schedule' must stand right before the Graph IR op it decides for, not before 'func.return'}}
  "tsched.schedule"() {block_x = 128} : () -> ()
  return %x : tensor<8xf32>
}

// Law: projector(U) ∘ projector(U) = projector(U) (spec §23).
// RUN: tessera-opt %s --tessera-tod-canonicalize | FileCheck %s

// CHECK-LABEL: func.func @same_value
// CHECK-NEXT:    %[[P:.+]] = "tod.projector"(%arg0)
// CHECK-NEXT:    return %[[P]]
func.func @same_value(%u: tensor<8x2xf32>) -> !tod.operator<8, 8, f32, f32> {
  %p = "tod.projector"(%u) : (tensor<8x2xf32>) -> !tod.operator<8, 8, f32, f32>
  %0 = "tod.compose"(%p, %p) : (!tod.operator<8, 8, f32, f32>, !tod.operator<8, 8, f32, f32>) -> !tod.operator<8, 8, f32, f32>
  return %0 : !tod.operator<8, 8, f32, f32>
}

// Two projector ops on one basis are one projector; P∘P∘P collapses too.
// CHECK-LABEL: func.func @same_basis_thrice
// CHECK-NOT:     tod.compose
// CHECK:         return
func.func @same_basis_thrice(%u: tensor<8x2xf32>) -> !tod.operator<8, 8, f32, f32> {
  %p = "tod.projector"(%u) : (tensor<8x2xf32>) -> !tod.operator<8, 8, f32, f32>
  %q = "tod.projector"(%u) : (tensor<8x2xf32>) -> !tod.operator<8, 8, f32, f32>
  %0 = "tod.compose"(%p, %q) : (!tod.operator<8, 8, f32, f32>, !tod.operator<8, 8, f32, f32>) -> !tod.operator<8, 8, f32, f32>
  %1 = "tod.compose"(%0, %p) : (!tod.operator<8, 8, f32, f32>, !tod.operator<8, 8, f32, f32>) -> !tod.operator<8, 8, f32, f32>
  return %1 : !tod.operator<8, 8, f32, f32>
}

// Projectors onto different subspaces do not collapse.
// CHECK-LABEL: func.func @different_bases
// CHECK:         "tod.compose"
func.func @different_bases(%u: tensor<8x2xf32>, %v: tensor<8x2xf32>) -> !tod.operator<8, 8, f32, f32> {
  %p = "tod.projector"(%u) : (tensor<8x2xf32>) -> !tod.operator<8, 8, f32, f32>
  %q = "tod.projector"(%v) : (tensor<8x2xf32>) -> !tod.operator<8, 8, f32, f32>
  %0 = "tod.compose"(%p, %q) : (!tod.operator<8, 8, f32, f32>, !tod.operator<8, 8, f32, f32>) -> !tod.operator<8, 8, f32, f32>
  return %0 : !tod.operator<8, 8, f32, f32>
}

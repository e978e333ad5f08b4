// Law: adjoint(A ∘ B) = adjoint(B) ∘ adjoint(A).
// RUN: tessera-opt %s --tessera-tod-canonicalize | FileCheck %s

// CHECK-LABEL: func.func @reverses
// CHECK-SAME:    (%[[A:.+]]: !tod.operator<4 : i64, 2 : i64, f32, f32>, %[[B:.+]]: !tod.operator<8 : i64, 4 : i64, f32, f32>)
// CHECK:         %[[BH:.+]] = "tod.adjoint"(%[[B]]) : (!tod.operator<8 : i64, 4 : i64, f32, f32>) -> !tod.operator<4 : i64, 8 : i64, f32, f32>
// CHECK:         %[[AH:.+]] = "tod.adjoint"(%[[A]]) : (!tod.operator<4 : i64, 2 : i64, f32, f32>) -> !tod.operator<2 : i64, 4 : i64, f32, f32>
// CHECK:         %[[C:.+]] = "tod.compose"(%[[BH]], %[[AH]]) : {{.+}} -> !tod.operator<2 : i64, 8 : i64, f32, f32>
// CHECK-NEXT:    return %[[C]]
func.func @reverses(%a: !tod.operator<4, 2, f32, f32>, %b: !tod.operator<8, 4, f32, f32>) -> !tod.operator<2, 8, f32, f32> {
  %0 = "tod.compose"(%a, %b) : (!tod.operator<4, 2, f32, f32>, !tod.operator<8, 4, f32, f32>) -> !tod.operator<8, 2, f32, f32>
  %1 = "tod.adjoint"(%0) : (!tod.operator<8, 2, f32, f32>) -> !tod.operator<2, 8, f32, f32>
  return %1 : !tod.operator<2, 8, f32, f32>
}

// With the involution, adjoint(adjoint(A) ∘ B) becomes adjoint(B) ∘ A.
// CHECK-LABEL: func.func @with_involution
// CHECK-SAME:    (%[[A:.+]]: !tod.operator<2 : i64, 4 : i64, f32, f32>, %[[B:.+]]: !tod.operator<8 : i64, 4 : i64, f32, f32>)
// CHECK:         %[[BH:.+]] = "tod.adjoint"(%[[B]])
// CHECK-NEXT:    %[[C:.+]] = "tod.compose"(%[[BH]], %[[A]])
// CHECK-NEXT:    return %[[C]]
func.func @with_involution(%a: !tod.operator<2, 4, f32, f32>, %b: !tod.operator<8, 4, f32, f32>) -> !tod.operator<2, 8, f32, f32> {
  %ah = "tod.adjoint"(%a) : (!tod.operator<2, 4, f32, f32>) -> !tod.operator<4, 2, f32, f32>
  %0 = "tod.compose"(%ah, %b) : (!tod.operator<4, 2, f32, f32>, !tod.operator<8, 4, f32, f32>) -> !tod.operator<8, 2, f32, f32>
  %1 = "tod.adjoint"(%0) : (!tod.operator<8, 2, f32, f32>) -> !tod.operator<2, 8, f32, f32>
  return %1 : !tod.operator<2, 8, f32, f32>
}

// The adjoint of an operator that is not a composition stays.
// CHECK-LABEL: func.func @dense_stays
// CHECK:         %[[D:.+]] = "tod.dense"
// CHECK-NEXT:    "tod.adjoint"(%[[D]])
func.func @dense_stays(%m: tensor<4x8xf32>) -> !tod.operator<4, 8, f32, f32> {
  %d = "tod.dense"(%m) : (tensor<4x8xf32>) -> !tod.operator<8, 4, f32, f32>
  %1 = "tod.adjoint"(%d) : (!tod.operator<8, 4, f32, f32>) -> !tod.operator<4, 8, f32, f32>
  return %1 : !tod.operator<4, 8, f32, f32>
}

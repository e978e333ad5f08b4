// Law: commutator(A, A) = 0.
// RUN: tessera-opt %s --tessera-tod-canonicalize | FileCheck %s

// CHECK-LABEL: func.func @with_itself
// CHECK-NEXT:    %[[Z:.+]] = "tod.zero"() : () -> !tod.operator<4 : i64, 4 : i64, f32, f32>
// CHECK-NEXT:    return %[[Z]]
func.func @with_itself(%a: !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32> {
  %0 = "tod.commutator"(%a, %a) : (!tod.operator<4, 4, f32, f32>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  return %0 : !tod.operator<4, 4, f32, f32>
}

// CHECK-LABEL: func.func @two_operators
// CHECK:         "tod.commutator"(%arg0, %arg1)
func.func @two_operators(%a: !tod.operator<4, 4, f32, f32>, %b: !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32> {
  %0 = "tod.commutator"(%a, %b) : (!tod.operator<4, 4, f32, f32>, !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  return %0 : !tod.operator<4, 4, f32, f32>
}

// Laws: compose(A, 0) = 0 = compose(0, A); plus(A, 0) = A = plus(0, A).
// RUN: tessera-opt %s --tessera-tod-canonicalize | FileCheck %s

// CHECK-LABEL: func.func @compose_with_zero
// CHECK-NEXT:    %[[Z1:.+]] = "tod.zero"() : () -> !tod.operator<2 : i64, 8 : i64, f32, f32>
// CHECK-NEXT:    %[[Z2:.+]] = "tod.zero"() : () -> !tod.operator<4 : i64, 2 : i64, f32, f32>
// CHECK-NEXT:    return %[[Z1]], %[[Z2]]
func.func @compose_with_zero(%a: !tod.operator<4, 8, f32, f32>) -> (!tod.operator<2, 8, f32, f32>, !tod.operator<4, 2, f32, f32>) {
  %z = "tod.zero"() : () -> !tod.operator<2, 4, f32, f32>
  %0 = "tod.compose"(%a, %z) : (!tod.operator<4, 8, f32, f32>, !tod.operator<2, 4, f32, f32>) -> !tod.operator<2, 8, f32, f32>
  %w = "tod.zero"() : () -> !tod.operator<8, 2, f32, f32>
  %1 = "tod.compose"(%w, %a) : (!tod.operator<8, 2, f32, f32>, !tod.operator<4, 8, f32, f32>) -> !tod.operator<4, 2, f32, f32>
  return %0, %1 : !tod.operator<2, 8, f32, f32>, !tod.operator<4, 2, f32, f32>
}

// CHECK-LABEL: func.func @plus_zero
// CHECK-NEXT:    return %arg0, %arg0
func.func @plus_zero(%a: !tod.operator<4, 8, f32, f32>) -> (!tod.operator<4, 8, f32, f32>, !tod.operator<4, 8, f32, f32>) {
  %z = "tod.zero"() : () -> !tod.operator<4, 8, f32, f32>
  %0 = "tod.plus"(%a, %z) : (!tod.operator<4, 8, f32, f32>, !tod.operator<4, 8, f32, f32>) -> !tod.operator<4, 8, f32, f32>
  %1 = "tod.plus"(%z, %a) : (!tod.operator<4, 8, f32, f32>, !tod.operator<4, 8, f32, f32>) -> !tod.operator<4, 8, f32, f32>
  return %0, %1 : !tod.operator<4, 8, f32, f32>, !tod.operator<4, 8, f32, f32>
}

// A complex zero makes the sum complex: the real A cannot stand for it.
// CHECK-LABEL: func.func @complex_zero
// CHECK:         "tod.plus"
func.func @complex_zero(%a: !tod.operator<4, 8, f32, f32>) -> !tod.operator<4, 8, complex<f32>, f32> {
  %z = "tod.zero"() : () -> !tod.operator<4, 8, complex<f32>, f32>
  %0 = "tod.plus"(%a, %z) : (!tod.operator<4, 8, f32, f32>, !tod.operator<4, 8, complex<f32>, f32>) -> !tod.operator<4, 8, complex<f32>, f32>
  return %0 : !tod.operator<4, 8, complex<f32>, f32>
}

// The zero of an extent known only at run time cannot be built: the composition stays.
// CHECK-LABEL: func.func @dynamic_extent
// CHECK:         "tod.compose"
func.func @dynamic_extent(%a: !tod.operator<"?", "?", f32, f32>) -> !tod.operator<2, "?", f32, f32> {
  %z = "tod.zero"() : () -> !tod.operator<2, 4, f32, f32>
  %0 = "tod.compose"(%a, %z) : (!tod.operator<"?", "?", f32, f32>, !tod.operator<2, 4, f32, f32>) -> !tod.operator<2, "?", f32, f32>
  return %0 : !tod.operator<2, "?", f32, f32>
}

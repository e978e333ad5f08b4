// Laws: power(A, 0) = I, power(A, 1) = A.
// RUN: tessera-opt %s --tessera-tod-canonicalize | FileCheck %s

// CHECK-LABEL: func.func @zeroth_and_first
// CHECK-NEXT:    %[[I:.+]] = "tod.eye"() : () -> !tod.operator<4 : i64, 4 : i64, f32, f32>
// CHECK-NEXT:    return %[[I]], %arg0
func.func @zeroth_and_first(%a: !tod.operator<4, 4, f32, f32>) -> (!tod.operator<4, 4, f32, f32>, !tod.operator<4, 4, f32, f32>) {
  %0 = "tod.power"(%a) {exponent = 0 : i64} : (!tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  %1 = "tod.power"(%a) {exponent = 1 : i64} : (!tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  return %0, %1 : !tod.operator<4, 4, f32, f32>, !tod.operator<4, 4, f32, f32>
}

// The identity of an extent known only at run time cannot be built: the 0th power stays.
// CHECK-LABEL: func.func @dynamic_zeroth
// CHECK:         "tod.power"(%arg0) {exponent = 0 : i64}
func.func @dynamic_zeroth(%a: !tod.operator<"?", "?", f32, f32>) -> !tod.operator<"?", "?", f32, f32> {
  %0 = "tod.power"(%a) {exponent = 0 : i64} : (!tod.operator<"?", "?", f32, f32>) -> !tod.operator<"?", "?", f32, f32>
  return %0 : !tod.operator<"?", "?", f32, f32>
}

// CHECK-LABEL: func.func @square
// CHECK:         "tod.power"(%arg0) {exponent = 2 : i64}
func.func @square(%a: !tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32> {
  %0 = "tod.power"(%a) {exponent = 2 : i64} : (!tod.operator<4, 4, f32, f32>) -> !tod.operator<4, 4, f32, f32>
  return %0 : !tod.operator<4, 4, f32, f32>
}

// Law: adjoint(adjoint(A)) = A (spec §23).
// RUN: tessera-opt %s --tessera-tod-canonicalize | FileCheck %s

// CHECK-LABEL: func.func @twice
// CHECK-SAME:    (%[[A:.+]]: !tod.operator<8 : i64, 4 : i64, f32, f32>)
// CHECK-NEXT:    return %[[A]]
func.func @twice(%a: !tod.operator<8, 4, f32, f32>) -> !tod.operator<8, 4, f32, f32> {
  %0 = "tod.adjoint"(%a) : (!tod.operator<8, 4, f32, f32>) -> !tod.operator<4, 8, f32, f32>
  %1 = "tod.adjoint"(%0) : (!tod.operator<4, 8, f32, f32>) -> !tod.operator<8, 4, f32, f32>
  return %1 : !tod.operator<8, 4, f32, f32>
}

// Four times is twice twice.
// CHECK-LABEL: func.func @four_times
// CHECK-SAME:    (%[[A:.+]]: !tod.operator<8 : i64, 4 : i64, f32, f32>)
// CHECK-NEXT:    return %[[A]]
func.func @four_times(%a: !tod.operator<8, 4, f32, f32>) -> !tod.operator<8, 4, f32, f32> {
  %0 = "tod.adjoint"(%a) : (!tod.operator<8, 4, f32, f32>) -> !tod.operator<4, 8, f32, f32>
  %1 = "tod.adjoint"(%0) : (!tod.operator<4, 8, f32, f32>) -> !tod.operator<8, 4, f32, f32>
  %2 = "tod.adjoint"(%1) : (!tod.operator<8, 4, f32, f32>) -> !tod.operator<4, 8, f32, f32>
  %3 = "tod.adjoint"(%2) : (!tod.operator<4, 8, f32, f32>) -> !tod.operator<8, 4, f32, f32>
  return %3 : !tod.operator<8, 4, f32, f32>
}

// Not when the round trip changes the type (here the accumulation type): A would not fit the uses.
// CHECK-LABEL: func.func @type_changes
// CHECK:         %[[X:.+]] = "tod.adjoint"(%arg0)
// CHECK:         %[[Y:.+]] = "tod.adjoint"(%[[X]])
// CHECK:         return %[[Y]]
func.func @type_changes(%a: !tod.operator<8, 4, f32, f32>) -> !tod.operator<8, 4, f32, f64> {
  %0 = "tod.adjoint"(%a) : (!tod.operator<8, 4, f32, f32>) -> !tod.operator<4, 8, f32, f64>
  %1 = "tod.adjoint"(%0) : (!tod.operator<4, 8, f32, f64>) -> !tod.operator<8, 4, f32, f64>
  return %1 : !tod.operator<8, 4, f32, f64>
}

// One adjoint of an operator known nothing about stays.
// CHECK-LABEL: func.func @once
// CHECK:         "tod.adjoint"(%arg0)
func.func @once(%a: !tod.operator<8, 4, f32, f32>) -> !tod.operator<4, 8, f32, f32> {
  %0 = "tod.adjoint"(%a) : (!tod.operator<8, 4, f32, f32>) -> !tod.operator<4, 8, f32, f32>
  return %0 : !tod.operator<4, 8, f32, f32>
}

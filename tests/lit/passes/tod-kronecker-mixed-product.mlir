// Laws: tensor(A, B) = kronecker(A, B); (A ⊗ B) ∘ (C ⊗ D) = (A ∘ C) ⊗ (B ∘ D) when A ∘ C is defined.
// RUN: tessera-opt %s --tessera-tod-canonicalize | FileCheck %s

// CHECK-LABEL: func.func @tensor_is_kronecker
// CHECK-NEXT:    %[[K:.+]] = "tod.kronecker"(%arg0, %arg1)
// CHECK-NEXT:    return %[[K]]
func.func @tensor_is_kronecker(%a: !tod.operator<2, 3, f32, f32>, %b: !tod.operator<4, 5, f32, f32>) -> !tod.operator<8, 15, f32, f32> {
  %0 = "tod.tensor"(%a, %b) : (!tod.operator<2, 3, f32, f32>, !tod.operator<4, 5, f32, f32>) -> !tod.operator<8, 15, f32, f32>
  return %0 : !tod.operator<8, 15, f32, f32>
}

// CHECK-LABEL: func.func @mixed_product
// CHECK-SAME:    (%[[A:.+]]: !tod.operator<3 : i64, 2 : i64, f32, f32>, %[[B:.+]]: !tod.operator<5 : i64, 4 : i64, f32, f32>, %[[C:.+]]: !tod.operator<6 : i64, 3 : i64, f32, f32>, %[[D:.+]]: !tod.operator<7 : i64, 5 : i64, f32, f32>)
// CHECK-NEXT:    %[[AC:.+]] = "tod.compose"(%[[A]], %[[C]]) : {{.+}} -> !tod.operator<6 : i64, 2 : i64, f32, f32>
// CHECK-NEXT:    %[[BD:.+]] = "tod.compose"(%[[B]], %[[D]]) : {{.+}} -> !tod.operator<7 : i64, 4 : i64, f32, f32>
// CHECK-NEXT:    %[[K:.+]] = "tod.kronecker"(%[[AC]], %[[BD]]) : {{.+}} -> !tod.operator<42 : i64, 8 : i64, f32, f32>
// CHECK-NEXT:    return %[[K]]
func.func @mixed_product(%a: !tod.operator<3, 2, f32, f32>, %b: !tod.operator<5, 4, f32, f32>,
                         %c: !tod.operator<6, 3, f32, f32>, %d: !tod.operator<7, 5, f32, f32>) -> !tod.operator<42, 8, f32, f32> {
  %ab = "tod.tensor"(%a, %b) : (!tod.operator<3, 2, f32, f32>, !tod.operator<5, 4, f32, f32>) -> !tod.operator<15, 8, f32, f32>
  %cd = "tod.kronecker"(%c, %d) : (!tod.operator<6, 3, f32, f32>, !tod.operator<7, 5, f32, f32>) -> !tod.operator<42, 15, f32, f32>
  %0 = "tod.compose"(%ab, %cd) : (!tod.operator<15, 8, f32, f32>, !tod.operator<42, 15, f32, f32>) -> !tod.operator<42, 8, f32, f32>
  return %0 : !tod.operator<42, 8, f32, f32>
}

// The products chain (3·5 = 5·3) but the factors do not: A takes 3, C gives 5. No rewrite.
// CHECK-LABEL: func.func @factors_do_not_chain
// CHECK:         %[[L:.+]] = "tod.kronecker"(%arg0, %arg1)
// CHECK-NEXT:    %[[R:.+]] = "tod.kronecker"(%arg2, %arg3)
// CHECK-NEXT:    "tod.compose"(%[[L]], %[[R]])
func.func @factors_do_not_chain(%a: !tod.operator<3, 2, f32, f32>, %b: !tod.operator<5, 4, f32, f32>,
                                %c: !tod.operator<6, 5, f32, f32>, %d: !tod.operator<7, 3, f32, f32>) -> !tod.operator<42, 8, f32, f32> {
  %ab = "tod.kronecker"(%a, %b) : (!tod.operator<3, 2, f32, f32>, !tod.operator<5, 4, f32, f32>) -> !tod.operator<15, 8, f32, f32>
  %cd = "tod.kronecker"(%c, %d) : (!tod.operator<6, 5, f32, f32>, !tod.operator<7, 3, f32, f32>) -> !tod.operator<42, 15, f32, f32>
  %0 = "tod.compose"(%ab, %cd) : (!tod.operator<15, 8, f32, f32>, !tod.operator<42, 15, f32, f32>) -> !tod.operator<42, 8, f32, f32>
  return %0 : !tod.operator<42, 8, f32, f32>
}

// Extents known only at run time cannot be matched: no rewrite.
// CHECK-LABEL: func.func @dynamic_factors
// CHECK:         "tod.compose"
func.func @dynamic_factors(%a: !tod.operator<"?", 2, f32, f32>, %b: !tod.operator<5, 4, f32, f32>,
                           %c: !tod.operator<6, 3, f32, f32>, %d: !tod.operator<7, 5, f32, f32>) -> !tod.operator<42, 8, f32, f32> {
  %ab = "tod.kronecker"(%a, %b) : (!tod.operator<"?", 2, f32, f32>, !tod.operator<5, 4, f32, f32>) -> !tod.operator<"?", 8, f32, f32>
  %cd = "tod.kronecker"(%c, %d) : (!tod.operator<6, 3, f32, f32>, !tod.operator<7, 5, f32, f32>) -> !tod.operator<42, 15, f32, f32>
  %0 = "tod.compose"(%ab, %cd) : (!tod.operator<"?", 8, f32, f32>, !tod.operator<42, 15, f32, f32>) -> !tod.operator<42, 8, f32, f32>
  return %0 : !tod.operator<42, 8, f32, f32>
}

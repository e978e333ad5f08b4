// tessera-strict-math (the strict numerics profile): f32 transcendentals, square roots and divisions, scalar
// or vector, are computed in f64 and rounded once to f32; f64 ones stay; fast-math flags become none, so
// nothing is contracted.
// RUN: tessera-opt %s --tessera-strict-math | FileCheck %s

// CHECK-LABEL: func.func @k
// CHECK:         %[[X:.+]] = arith.extf %arg0 : vector<32xf32> to vector<32xf64>
// CHECK:         %[[E:.+]] = math.exp %[[X]] : vector<32xf64>
// CHECK:         %[[R:.+]] = arith.truncf %[[E]] : vector<32xf64> to vector<32xf32>
// CHECK:         arith.divf %{{.+}}, %{{.+}} : f64
// CHECK:         math.erf %{{.+}} : f64
// CHECK:         math.rsqrt %{{.+}} : f64
// CHECK-NOT:     fastmath
// CHECK:         arith.mulf %arg1, %arg1 : f32
// CHECK-NOT:     fastmath
// CHECK:         math.erf %arg2 : f64
// CHECK-NOT:     fastmath
// CHECK:         return %[[R]]
func.func @k(%v: vector<32xf32>, %s: f32, %d: f64) -> (vector<32xf32>, f32, f32, f32, f32, f64) {
  %0 = math.exp %v : vector<32xf32>
  %1 = arith.divf %s, %s : f32
  %2 = math.erf %s fastmath<afn> : f32
  %3 = math.rsqrt %s : f32
  %4 = arith.mulf %s, %s fastmath<contract> : f32
  %5 = math.erf %d : f64
  return %0, %1, %2, %3, %4, %5 : vector<32xf32>, f32, f32, f32, f32, f64
}

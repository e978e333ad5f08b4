// tessera-cpu-vector-math: f32 math on vectors becomes chunked calls of glibc's libmvec variants
// (AVX2: 8 lanes, `_ZGVdN8v_<name>f`). Scalar math and unsupported element types are left alone.
// REQUIRES: libmvec
// RUN: tessera-opt %s --tessera-cpu-vector-math="arch=x86_64 features=+avx2" | FileCheck %s

// CHECK: func.func private @_ZGVdN8v_erff(vector<8xf32>) -> vector<8xf32>
// CHECK-LABEL: func.func @gelu_core
// CHECK-COUNT-4: vector.extract_strided_slice %{{.+}} {offsets = [{{[0-9]+}}], sizes = [8], strides = [1]} : vector<32xf32> to vector<8xf32>
// CHECK-NOT:     math.erf %{{.+}} : vector
// CHECK:         math.erf %{{.+}} : f32
// CHECK:         math.erf %{{.+}} : vector<4xf64>
func.func @gelu_core(%v: vector<32xf32>, %s: f32, %d: vector<4xf64>) -> (vector<32xf32>, f32, vector<4xf64>) {
  %0 = math.erf %v : vector<32xf32>
  %1 = math.erf %s : f32
  %2 = math.erf %d : vector<4xf64>
  return %0, %1, %2 : vector<32xf32>, f32, vector<4xf64>
}

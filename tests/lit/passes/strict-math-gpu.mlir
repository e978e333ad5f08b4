// tessera-strict-math gpu=true (the strict profile on ptx and amdgpu), then tessera-gpu-math: f32 (and f16,
// bf16) transcendentals and rsqrt computed in f64 and rounded once (f16 through f32: both roundings
// innocuous), by passes/f64_math.py's plain f64 arithmetic, with no math op, no approximation and no
// fast-math flag left; f32 division and sqrt stay f32 (div.rn.f32 and sqrt.rn.f32 are correctly rounded).
// RUN: tessera-opt %s --tessera-strict-math=gpu=true | FileCheck %s --check-prefix=WIDE
// RUN: tessera-opt %s --tessera-strict-math=gpu=true --tessera-gpu-math | FileCheck %s

// WIDE-LABEL: func.func @k
// WIDE:         %[[X:.+]] = arith.extf %arg0 : f32 to f64
// WIDE-NEXT:    %[[E:.+]] = math.exp %[[X]] : f64
// WIDE-NEXT:    arith.truncf %[[E]] : f64 to f32
// WIDE:         arith.divf %{{.+}}, %{{.+}} : f32
// WIDE:         math.sqrt %{{.+}} : f32
// WIDE:         math.rsqrt %{{.+}} : f64
// WIDE:         math.powf %{{.+}}, %{{.+}} : f64
// WIDE:         %[[H:.+]] = arith.extf %arg1 : f16 to f64
// WIDE-NEXT:    %[[T:.+]] = math.tanh %[[H]] : f64
// WIDE-NEXT:    %[[T32:.+]] = arith.truncf %[[T]] : f64 to f32
// WIDE-NEXT:    arith.truncf %[[T32]] : f32 to f16
// WIDE-NOT:     fastmath

// CHECK-LABEL: func.func @k
// CHECK:         arith.extf %arg0 : f32 to f64
// exp's reduction: x·log2(e) rounded by 1.5·2^52, then Cody and Waite's two-part ln 2
// CHECK:         arith.constant 1.4426950408889634 : f64
// CHECK:         arith.constant 0x4338000000000000 : f64
// CHECK:         arith.constant 0.69314718036912382 : f64
// CHECK:         arith.constant 1.9082149292705877E-10 : f64
// CHECK:         arith.truncf %{{.+}} : f64 to f32
// CHECK:         arith.divf %{{.+}}, %{{.+}} : f32
// CHECK:         llvm.call_intrinsic "llvm.sqrt.f32"
// CHECK:         llvm.call_intrinsic "llvm.sqrt.f64"
// CHECK:         arith.truncf %{{.+}} : f64 to f32
// CHECK-NOT:     math.
// CHECK-NOT:     fastmath
// CHECK-NOT:     llvm.exp2
func.func @k(%x: f32, %h: f16) -> (f32, f32, f32, f32, f32, f16) {
  %0 = math.exp %x fastmath<afn> : f32
  %1 = arith.divf %0, %x : f32
  %2 = math.sqrt %x : f32
  %3 = math.rsqrt %x : f32
  %4 = math.powf %x, %0 : f32
  %5 = math.tanh %h : f16
  return %0, %1, %2, %3, %4, %5 : f32, f32, f32, f32, f32, f16
}

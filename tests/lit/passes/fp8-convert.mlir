// tessera-fp8-convert: a kernel's one-byte fp8 conversions (the frontend's extf from / truncf to f8E4M3FN and
// f8E5M2 around a bitcast of the byte) spelled out. By default as integer arithmetic on the f32's bits (every
// target but ptx sm_90+): a widened normal byte is its magnitude shifted into f32's fields and rebiased (e4m3:
// << 20, + (127-7) << 23), a subnormal its fraction times 2^-9, S.1111.111 NaN; a narrowed f32 is clamped to
// 448 (0x43E00000) unless NaN, rounded to nearest even (+ 0x7FFFF + the kept lowest bit, >> 20) or below
// 2^-6 (0x3C800000) shifted by its exponent with the remainder against the half, its sign put back, NaN 0x7F.
// native=true: ptx's cvt through LLVM's NVVM intrinsics, the NaN byte selected as the interpreter writes it.
// An f64 is rounded to f32 first (innocuous: 24 >= 2*4 + 2 bits).
// RUN: tessera-opt %s --tessera-fp8-convert | FileCheck %s
// RUN: tessera-opt %s --tessera-fp8-convert=native=true | FileCheck %s --check-prefix=NATIVE

// CHECK-LABEL: func.func @load
// CHECK-NOT:     f8E4M3FN
// CHECK:         %[[B:.+]] = arith.extui %arg0 : i8 to i32
// CHECK:         arith.andi %[[B]], %c127_i32
// CHECK:         arith.shli %{{.+}}, %c20_i32
// CHECK:         arith.addi %{{.+}}, %c1006632960_i32
// CHECK:         arith.mulf %{{.+}}, %cst : f32
// CHECK:         arith.cmpi eq, %{{.+}}, %c127_i32
// CHECK:         %[[F:.+]] = arith.bitcast %{{.+}} : i32 to f32
// CHECK-NEXT:    return %[[F]] : f32
// NATIVE-LABEL: func.func @load
// NATIVE:         %[[H:.+]] = arith.extui %arg0 : i8 to i16
// NATIVE-NEXT:    %[[P:.+]] = llvm.call_intrinsic "llvm.nvvm.e4m3x2.to.f16x2.rn"(%[[H]]) : (i16) -> vector<2xf16>
// NATIVE:         %[[L:.+]] = llvm.extractelement %[[P]]
// NATIVE-NEXT:    arith.extf %[[L]] : f16 to f32
func.func @load(%b: i8) -> f32 {
  %0 = arith.bitcast %b : i8 to f8E4M3FN
  %1 = arith.extf %0 : f8E4M3FN to f32
  return %1 : f32
}

// CHECK-LABEL: func.func @store
// CHECK-NOT:     f8E5M2
// CHECK:         %[[X:.+]] = arith.bitcast %arg0 : f32 to i32
// CHECK:         arith.cmpi ugt, %{{.+}}, %c2139095040_i32
// CHECK:         arith.cmpi ugt, %{{.+}}, %c1197473792_i32
// CHECK:         arith.shrui %{{.+}}, %c21_i32
// CHECK:         %[[BYTE:.+]] = arith.trunci %{{.+}} : i32 to i8
// CHECK-NEXT:    return %[[BYTE]] : i8
// NATIVE-LABEL: func.func @store
// NATIVE:         %[[P:.+]] = llvm.call_intrinsic "llvm.nvvm.ff.to.e5m2x2.rn"(%{{.+}}, %arg0) : (f32, f32) -> i16
// NATIVE-NEXT:    %[[LOW:.+]] = arith.trunci %[[P]] : i16 to i8
// NATIVE-NEXT:    %[[NAN:.+]] = arith.cmpf uno, %arg0, %arg0 : f32
// NATIVE-NEXT:    %[[Q:.+]] = arith.constant 126 : i8
// NATIVE-NEXT:    %[[R:.+]] = arith.select %[[NAN]], %[[Q]], %[[LOW]] : i8
// NATIVE-NEXT:    return %[[R]] : i8
func.func @store(%x: f32) -> i8 {
  %0 = arith.truncf %x : f32 to f8E5M2
  %1 = arith.bitcast %0 : f8E5M2 to i8
  return %1 : i8
}

// CHECK-LABEL: func.func @store_f64
// CHECK:         %[[X:.+]] = arith.truncf %arg0 : f64 to f32
// CHECK-NEXT:    arith.bitcast %[[X]] : f32 to i32
// CHECK:         arith.cmpi ugt, %{{.+}}, %c1138753536_i32
func.func @store_f64(%x: f64) -> i8 {
  %0 = arith.truncf %x : f64 to f8E4M3FN
  %1 = arith.bitcast %0 : f8E4M3FN to i8
  return %1 : i8
}

// A vector of bytes (the CPU GEMM's packing, backends/cpu/gemm.py) widens lane by lane with the same integer
// arithmetic on splat constants, native=true included (the cvt intrinsics take one pair of bytes).
// CHECK-LABEL: func.func @load_vector
// CHECK-NOT:     f8E5M2
// CHECK:         %[[B:.+]] = arith.extui %arg0 : vector<16xi8> to vector<16xi32>
// CHECK:         arith.andi %[[B]], %cst{{.*}} : vector<16xi32>
// CHECK:         arith.sitofp %{{.+}} : vector<16xi32> to vector<16xf32>
// CHECK:         %[[F:.+]] = arith.bitcast %{{.+}} : vector<16xi32> to vector<16xf32>
// CHECK-NEXT:    return %[[F]] : vector<16xf32>
// NATIVE-LABEL: func.func @load_vector
// NATIVE-NOT:     llvm.call_intrinsic
// NATIVE:         arith.extui %arg0 : vector<16xi8> to vector<16xi32>
func.func @load_vector(%b: vector<16xi8>) -> vector<16xf32> {
  %0 = arith.bitcast %b : vector<16xi8> to vector<16xf8E5M2>
  %1 = arith.extf %0 : vector<16xf8E5M2> to vector<16xf32>
  return %1 : vector<16xf32>
}

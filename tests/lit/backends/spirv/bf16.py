# bf16 tensors without SPV_KHR_bfloat16 (no device declared): their memory is the 16 bits (an i16 pointer, not
# the f32 one the upstream conversion would make of bf16), converted with integer arithmetic: f32 to bf16
# rounds to nearest even on the bits (NaN made the quiet 0x7FC0 = 32704), bf16 to f32 shifts them up.
# RUN: tessera-cc %s --target spirv --compile-to=spirv | FileCheck %s
# RUN: tessera-cc %s --target spirv --compile-to=spirv | FileCheck %s --check-prefix=NONE

# CHECK-LABEL: spirv.func @to_bf16__elementwise0(%{{[^:]+}}: !spirv.ptr<f32, CrossWorkgroup> {{.*}}, %{{[^:]+}}: !spirv.ptr<i16, CrossWorkgroup>
# CHECK:         %[[BITS:.+]] = spirv.Bitcast %{{.+}} : f32 to i32
# CHECK:         spirv.ShiftRightLogical %[[BITS]], %{{.+}} : i32, i32
# CHECK:         %[[HIGH:.+]] = spirv.SConvert %{{.+}} : i32 to i16
# CHECK:         %[[OUT:.+]] = spirv.Select %{{.+}}, %{{.+}}, %[[HIGH]] : i1, i16
# CHECK:         spirv.Store "CrossWorkgroup" %{{.+}}, %[[OUT]] : i16
# CHECK-LABEL: spirv.func @from_bf16__elementwise0(%{{[^:]+}}: !spirv.ptr<i16, CrossWorkgroup>
# CHECK:         %[[IN:.+]] = spirv.Load "CrossWorkgroup" %{{.+}} : i16
# CHECK-NEXT:    %[[WIDE:.+]] = spirv.UConvert %[[IN]] : i16 to i32
# CHECK-NEXT:    %[[UP:.+]] = spirv.ShiftLeftLogical %[[WIDE]], %{{.+}} : i32, i32
# CHECK-NEXT:    spirv.Bitcast %[[UP]] : i32 to f32
# The block dequantize's last kernel (f32(q) * s, rounded) stores its result as i16 too.
# CHECK-LABEL: spirv.func @dequantize__elementwise{{[0-9]+}}({{.*}}: !spirv.ptr<i16, CrossWorkgroup>
# CHECK:         spirv.Store "CrossWorkgroup" %{{.+}}, %{{.+}} : i16

# No bf16 value is left anywhere (the conversion would make each an f32).
# NONE-NOT: {{(: |x|<)bf16}}

from tessera import bf16, f32, i8, function, op, tensor


@function
def to_bf16(X: tensor[f32, "N"]):
    return op.cast(X, bf16)


@function
def from_bf16(B: tensor[bf16, "N"]):
    return op.cast(B, f32)


@function
def dequantize(Q: tensor[i8, "N", "D"], b: tensor[f32, "N", "K"]):
    return op.dequantize(Q, b, block=8, dtype=bf16)

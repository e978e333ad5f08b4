# tessera-simt-vector-access (passes/simt_vector_access.py) on the register row kernel of a bf16 layernorm of
# 512 columns for ptx: each lane's 8 consecutive loads of X (columns 8l + 256j …) are one 16-byte vector.load
# where the element's address is 16-byte aligned at run time, else the 8 loads as written; G's and B's the same;
# the 8 stores of a chunk one vector.store under the same test; the PTX has ld and st .global.v4.b32.
# RUN: tessera-cc %s --target ptx --compile-to=gpu | FileCheck %s
# RUN: tessera-cc %s --target ptx --compile-to=ptx | FileCheck %s --check-prefix=PTX

from tessera import bf16, function, op, tensor

# CHECK-LABEL: gpu.func @ln__row0(
# CHECK:         %[[P:.+]] = memref.extract_aligned_pointer_as_index %[[X:[^ ]+]] : memref<?x?xbf16>
# CHECK:         %[[OK:.+]] = arith.cmpi eq, %{{.+}}, %{{.+}} : index
# CHECK:         %[[V:.+]] = scf.if %[[OK]] -> (vector<8xbf16>) {
# CHECK:           vector.load %[[X]][%{{.+}}, %{{.+}}] {alignment = 16 : i64} : memref<?x?xbf16>, vector<8xbf16>
# CHECK:         } else {
# CHECK-COUNT-8:   memref.load %[[X]][
# CHECK:           vector.from_elements
# CHECK:         }
# CHECK:         vector.extract %[[V]][0]
# CHECK:         vector.extract %[[V]][7]
# CHECK:         scf.if %{{.+}} -> (vector<8xbf16>) {
# CHECK:           vector.load %[[X]]
# CHECK:         vector.load %{{.+}}[%{{.+}}] {alignment = 16 : i64} : memref<?xbf16>, vector<8xbf16>
# CHECK:           vector.store %{{.+}}, %{{.+}}[%{{.+}}, %{{.+}}] {alignment = 16 : i64} : memref<?x?xbf16>, vector<8xbf16>
# CHECK-NEXT:    } else {
# CHECK-COUNT-8:   memref.store

# PTX-LABEL: .entry ln__row0(
# PTX:         ld.global.v4.b32
# PTX:         st.global.v4.b32


@function
def ln(x: tensor[bf16, "M", 512], g: tensor[bf16, 512], b: tensor[bf16, 512]):
    return op.layernorm(x, gamma=g, beta=b)

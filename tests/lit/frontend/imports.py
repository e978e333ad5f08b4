# A call of an imported function (programming model Part VIII): the frontend declares the import
# (func.func private, tessera.import) and calls it; it is not inlined, fusion makes the call its own group,
# and the kernels stage writes a plan call step, with the image's symbols and relocation; tessera-link
# resolves it against the exporting image.
# RUN: rm -rf %t && mkdir -p %t
# RUN: tessera-cc %s -I %S/Inputs --dump-ir-after-all %t/ir -o %t/model.tessera
# RUN: FileCheck %s --check-prefix=TTIR < %t/ir/00-ttir.mlir
# RUN: FileCheck %s --check-prefix=FUSE < %t/ir/05-fusion.mlir
# RUN: tessera-objdump --no-ir %t/model.tessera | FileCheck %s --check-prefix=SYMS
# RUN: tessera-cc %S/Inputs/lit_blocks.py -o %t/blocks.tessera
# RUN: tessera-link %t/model.tessera %t/blocks.tessera -o %t/linked.tessera
# RUN: tessera-objdump --no-ir %t/linked.tessera | FileCheck %s --check-prefix=LINKED

from tessera import f32, function, op, tensor
from lit_blocks import scaled


@function(export=True)
def model(X: tensor[f32, "B", 8], s: tensor[f32, 8]):
    return scaled(X + 1.0, s) * 2.0

# TTIR:       func.func private @scaled(tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xf32>
# TTIR-SAME:    tessera.import = "lit_blocks"
# TTIR-LABEL: func.func @model(
# TTIR-SAME:    tessera.export
# TTIR:         call @scaled(

# FUSE:       call @scaled({{.*}}tessera.group_kind = "call"

# SYMS:       symbols:
# SYMS-NEXT:    - {name: model, bind: export, signature: "(X: f32[B, 8], s: f32[8]) -> f32[B, 8]"}
# SYMS-NEXT:    - {name: scaled, bind: import, module: lit_blocks, signature: "(X: f32[M, N], s: f32[N]) -> f32[M, N]"}
# SYMS-NEXT:  relocations:
# SYMS-NEXT:    - {function: model, step: {{[0-9]+}}, kind: call, symbol: scaled}

# LINKED:     symbols:
# LINKED-DAG:   - {name: model, bind: export
# LINKED-DAG:   - {name: scaled, bind: export
# LINKED:     relocations: []

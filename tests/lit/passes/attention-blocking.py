# A fused flash attention's blocking on sm_90a (TargetFacts.attention_blocking): its keys per block and stages
# come from a search's trial or a stored autotuning result (tessera/tuning.py), else the kernel's table
# (attention_sm90.TUNED: 128 keys in 3 stages for D = 128); a function's tile and stages hints are its
# matmuls', not the attention's.
# RUN: tessera-cc %s --target ptx --arch sm_90a --compile-to=schedule | FileCheck %s --check-prefix=SCHED
# RUN: tessera-cc %s --target ptx --arch sm_90a -o %t.tessera && tessera-objdump %t.tessera | FileCheck %s --check-prefix=IMG

from tessera import bf16, function, op, tensor

# SCHED-LABEL: func.func @hinted(
# SCHED:         "tsched.schedule"() {KC = 64 : i64, MB = 128 : i64, NC = 256 : i64, at_launch = 0 : i64, stages = 4 : i64}
# SCHED-NEXT:    "ttensor.matmul"
# SCHED:         "ttensor.reshape"
# SCHED-NEXT:    "tsched.schedule"() {block_x = 128 : i64}
# SCHED-NEXT:    "ttensor.flash_attention"
# IMG:         - name: hinted__gemm0
# IMG:             pipeline.stages: 4
# IMG:             tile.N: 256
# IMG:         - name: hinted__attention{{[0-9]+}}
# IMG-NOT:         autotune
# IMG:             pipeline.stages: 3
# IMG:             tile.N: 128
@function(tile=(128, 256, 64), stages=4)
def hinted(X: tensor[bf16, 256, 128], W: tensor[bf16, 128, 128], K: tensor[bf16, 2, 256, 128],
           V: tensor[bf16, 2, 256, 128]):
    Q = op.reshape(X @ W, (2, 128, 128))
    return op.flash_attention(Q, K, V, scale=0.125)

# The bf16 sm_90a GEMM in clusters of two CTAs ($TESSERA_SM90_GEMM_CLUSTER=2, a benchmark's override the
# compile cache does not key on; backends/ptx/gemm_sm90.py's cluster_m): the cluster shape is fixed in the
# PTX, B's boxes are multicast to both CTAs, and stages are freed on both CTAs' barriers
# (test_ptx_gemm.py checks the plan's grid of whole clusters).
# RUN: env TESSERA_CACHE=0 TESSERA_SM90_GEMM_CLUSTER=2 tessera-cc %s --target ptx --arch sm_90a \
# RUN:   --compile-to=ptx > %t.ptx
# RUN: FileCheck %s --check-prefix=PTX < %t.ptx
# RUN: env TESSERA_CACHE=0 tessera-cc %s --target ptx --arch sm_90a --compile-to=ptx | FileCheck %s --check-prefix=OFF

from tessera import function, tensor, bf16


@function(tile=(128, 256, 64), stages=4)
def gemm(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"]) -> tensor[bf16, "M", "N"]:
    return A @ B

# PTX-LABEL: .entry gemm__gemm0(
# PTX:       .explicitcluster
# PTX-NEXT:  .reqnctapercluster 2, 1, 1
# PTX:       fence.mbarrier_init.release.cluster;
# PTX:       barrier.cluster.arrive.release.aligned;
# PTX-NEXT:  // end inline asm
# PTX-NEXT:  // begin inline asm
# PTX-NEXT:  barrier.cluster.wait.acquire.aligned;
# PTX:       mapa.shared::cluster.u32 r, {{%r[0-9]+}}, 1; @p mbarrier.arrive.shared::cluster.b64 _, [r];
# PTX:       mov.b16 m, 3; @p cp.async.bulk.tensor.2d.shared::cluster.global.tile.{{.*}}.multicast::cluster
# PTX:       barrier.cluster.arrive.release;
# PTX-NEXT:  // end inline asm
# PTX-NEXT:  // begin inline asm
# PTX-NEXT:  barrier.cluster.wait.acquire;

# OFF-NOT: reqnctapercluster
# OFF-NOT: multicast
# OFF-NOT: barrier.cluster

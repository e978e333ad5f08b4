# Barriers, cooperative groups and lane reductions for NVIDIA (tests/unit/group_kernels.py): tile.barrier() and
# the sync of a group of whole warps are bar.sync 0; a group within a warp syncs by bar.warp.sync on its own
# lanes' mask (lanes are scheduled independently since Volta); warp and group reductions are xor butterflies of
# shfl.sync.bfly over the full warp. ptxas assembles the PTX where it is installed.
# RUN: tessera-cc %S/../../../unit/group_kernels.py --target ptx --compile-to=ptx | FileCheck %s
# RUN: tessera-cc %S/../../../unit/group_kernels.py --target ptx --arch sm_90a --compile-to=ptx | FileCheck %s

# CHECK-LABEL: .visible .entry neighbours(
# CHECK:         bar.sync 0;
# A group of 4 lanes: mask 0xf shifted to the group's first lane (lane & ~3, within the warp's 5 bits).
# CHECK-LABEL: .visible .entry quads(
# CHECK:         and.b32 [[FIRST:%r[0-9]+]], %r{{[0-9]+}}, 28;
# CHECK-NEXT:    mov.b32 [[LANES:%r[0-9]+]], 15;
# CHECK-NEXT:    shl.b32 [[MASK:%r[0-9]+]], [[LANES]], [[FIRST]];
# CHECK-NEXT:    bar.warp.sync [[MASK]];
# CHECK-LABEL: .visible .entry halves(
# CHECK:         bar.sync 0;
# warp_reduce(i32, "sum"): five butterfly steps; the f64 group min of 16 lanes moves each half by itself.
# CHECK-LABEL: .visible .entry reductions(
# CHECK:         shfl.sync.bfly.b32 [[A:%r[0-9]+]], [[X:%r[0-9]+]], 16, 31, -1;
# CHECK-NEXT:    add.s32 {{%r[0-9]+}}, [[A]], [[X]];
# CHECK:         shfl.sync.bfly.b32 {{.+}}, 1, 31, -1;
# CHECK:         shfl.sync.bfly.b32 {{.+}}, 8, 31, -1;
# CHECK-NEXT:    shfl.sync.bfly.b32 {{.+}}, 8, 31, -1;
# CHECK-COUNT-4: min.f64
# CHECK:         shfl.sync.bfly.b32 [[B:%r[0-9]+]], [[Y:%r[0-9]+]], 1, 31, -1;
# CHECK-NEXT:    max.s32 {{%r[0-9]+}}, [[Y]], [[B]];

# Barriers, cooperative groups, lane reductions and shared arrays for NVIDIA (tests/unit/group_kernels.py):
# tile.barrier() and
# the sync of a group of whole warps are bar.sync 0; a group within a warp syncs by bar.warp.sync on its own
# lanes' mask (lanes are scheduled independently since Volta); warp and group reductions are xor butterflies of
# shfl.sync.bfly over the full warp. ptxas assembles the PTX where it is installed.
# RUN: tessera-cc %S/../../../unit/group_kernels.py --target ptx --compile-to=ptx | FileCheck %s
# RUN: tessera-cc %S/../../../unit/group_kernels.py --target ptx --arch sm_90a --compile-to=ptx | FileCheck %s
# RUN: tessera-cc %S/../../../unit/group_kernels.py --target ptx --arch sm_75 --compile-to=ptx | FileCheck %s --check-prefix=SM75

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
# Shared arrays are .shared globals (address space 3); tile.cp_async of a 4- or 8-byte element is
# cp.async.ca.shared.global from sm_80 on, waited for (cp.async.wait_all) at the next block barrier; a 2-byte
# element is a load and a st.shared. Before sm_80 every copy is a load and a st.shared, and nothing waits.
# CHECK-LABEL: .visible .entry reverse_blocks(
# CHECK:         .shared .align 4 .b8 __wg_reverse_blocks_0[512];
# CHECK:         cp.async.ca.shared.global [%rd{{[0-9]+}}], [%rd{{[0-9]+}}], 4;
# CHECK:         cp.async.wait_all;
# CHECK:         bar.sync 0;
# CHECK:         ld.shared.b32
# CHECK-LABEL: .visible .entry transpose_tiles(
# CHECK:         .shared .align 4 .b8 __wg_transpose_tiles_0[1088];
# CHECK-NOT:     cp.async
# CHECK:         st.shared.b32
# CHECK-NEXT:    bar.sync 0;
# CHECK-LABEL: .visible .entry rotate_wide_and_narrow(
# CHECK:         cp.async.ca.shared.global [%rd{{[0-9]+}}], [%rd{{[0-9]+}}], 8;
# CHECK:         st.shared.b16
# CHECK:         cp.async.wait_all;
# CHECK:         bar.sync 0;
# SM75-LABEL:  .visible .entry reverse_blocks(
# SM75-NOT:      cp.async
# SM75:          st.shared.b32
# SM75-NEXT:     bar.sync 0;
# SM75-NOT:      cp.async

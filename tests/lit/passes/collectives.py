# The tdist collectives lower to collective steps of the launch plan (docs/image-format.md), the same in every
# pipeline: no kernel, the op, its tensors, the mesh, the axis whose ranks take part, and the op's own
# attributes (reduction, dim, root, deterministic, algo). Elementwise work around them stays kernels.
# all_gather and reduce_scatter scale the extent of their dim by the axis' size (3 and 2 here).
# RUN: tessera-cc %s --compile-to=kernels | FileCheck %s
# RUN: tessera-cc %s --target ptx --compile-to=kernels | FileCheck %s
# RUN: tessera-cc %s --target amdgpu --compile-to=kernels | FileCheck %s
# RUN: tessera-cc %s --target spirv --compile-to=kernels | FileCheck %s

from tessera import dist, f32, function, op, tensor

mesh = dist.Mesh(axes=["dp", "tp"], devices=range(6), shape=(2, 3))

# CHECK: \22v3\22: {\22dtype\22: \22f32\22, \22dims\22: [\22M\22, \2212\22]}
# CHECK-SAME: \22v4\22: {\22dtype\22: \22f32\22, \22dims\22: [\22M\22, \224\22]}
# CHECK: {\22kernel\22: \22f__elementwise0\22
# CHECK-SAME: {\22collective\22: \22all_reduce\22, \22input\22: \22v1\22, \22output\22: \22v2\22, \22mesh_axes\22: [\22dp\22, \22tp\22], \22mesh_shape\22: [2, 3], \22axis\22: \22tp\22, \22reduce\22: \22sum\22, \22deterministic\22: true, \22algo\22: \22auto\22}
# CHECK-SAME: {\22collective\22: \22all_gather\22, \22input\22: \22v2\22, \22output\22: \22v3\22, \22mesh_axes\22: [\22dp\22, \22tp\22], \22mesh_shape\22: [2, 3], \22axis\22: \22dp\22, \22dim\22: 1}
# CHECK-SAME: {\22collective\22: \22reduce_scatter\22, \22input\22: \22v3\22, \22output\22: \22v4\22, \22mesh_axes\22: [\22dp\22, \22tp\22], \22mesh_shape\22: [2, 3], \22axis\22: \22tp\22, \22reduce\22: \22max\22, \22dim\22: 1, \22deterministic\22: false, \22algo\22: \22ring\22}
# CHECK-SAME: {\22kernel\22: \22f__elementwise4\22
# CHECK-SAME: {\22collective\22: \22broadcast\22, \22input\22: \22v5\22, \22output\22: \22v6\22, \22mesh_axes\22: [\22dp\22, \22tp\22], \22mesh_shape\22: [2, 3], \22axis\22: \22dp\22, \22root\22: 1}]


@function
def f(X: tensor[f32, "M", 6]):
    a = op.all_reduce(X * 2.0, mesh=mesh, axis="tp", deterministic=True)
    b = op.all_gather(a, mesh=mesh, axis="dp", dim=1)
    c = op.reduce_scatter(b, mesh=mesh, axis="tp", dim=1, op="max", algo="ring")
    return op.broadcast(c + 1.0, mesh=mesh, axis="dp", root=1)

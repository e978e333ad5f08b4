"""The programs the GPU tests run, by name: (source, target architecture).

One list for both ways of getting their images: compiled in the test process where the compiler is
installed, or built beforehand by build_images.py on a machine that has it and loaded from
$TESSERA_GPU_IMAGES (a GPU machine without MLIR, docs/nvidia.md "Testing on a GPU machine").
"""

import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]

AUTODIFF_F32 = """
from tessera import f32, function, grad, op, tensor

@function
def loss(X: tensor[f32, 64, 32], P: tensor[f32, 64, 32], g: tensor[f32, 32], b: tensor[f32, 32],
         V: tensor[f32, 64, 32]):
    A = op.softmax(X) + op.layernorm(X, gamma=g, beta=b) + op.rmsnorm(X, gamma=g) + op.gelu(op.bias_add(X, b))
    B = op.log(P) / P + op.exp(X * 0.5) * op.sqrt(P) + op.sigmoid(op.reshape(X.T, (64, 32)))
    C = op.sum(X, axis=1, keepdims=True) * op.rsqrt(P) + op.gelu(X, approximate="tanh") - op.relu(-X) + op.silu(X)
    D = op.max(X, axis=1, keepdims=True) * op.mean(X.T, axis=1) + op.softmax(X.T).T * X
    return op.mean(op.tanh(A + B + C + D) * V)

dloss = grad(loss, argnums=(0, 1, 2, 3))
"""

AUTODIFF_BF16 = """
from tessera import bf16, f32, function, grad, op, tensor

@function
def loss(X: tensor[f32, 64, 64], W: tensor[f32, 64, 128], b: tensor[f32, 128], V: tensor[f32, 64, 128]):
    H = op.gelu(op.bias_add(op.matmul(op.cast(X, bf16), op.cast(W, bf16), out_dtype=f32), b))
    return op.mean(op.tanh(H) * V)

dloss = grad(loss, argnums=(0, 1, 2))
"""

AUTODIFF_MLP = """
from tessera import bf16, f32, function, grad, op, tensor

@function
def loss(X: tensor[f32, 64, 32], Y: tensor[f32, 64, 16], W1: tensor[f32, 32, 64], b1: tensor[f32, 64],
         W2: tensor[f32, 64, 16], b2: tensor[f32, 16]):
    H = op.gelu(op.bias_add(op.matmul(op.cast(X, bf16), op.cast(W1, bf16), out_dtype=f32), b1))
    E = op.bias_add(op.matmul(op.cast(H, bf16), op.cast(W2, bf16), out_dtype=f32), b2) - Y
    return op.mean(E * E)

dloss = grad(loss, argnums=(2, 3, 4, 5))

@function
def step(X: tensor[f32, 64, 32], Y: tensor[f32, 64, 16], W1: tensor[f32, 32, 64], b1: tensor[f32, 64],
         W2: tensor[f32, 64, 16], b2: tensor[f32, 16]):
    gW1, gb1, gW2, gb2 = dloss(X, Y, W1, b1, W2, b2)
    lr = 0.1
    return loss(X, Y, W1, b1, W2, b2), W1 - lr * gW1, b1 - lr * gb1, W2 - lr * gW2, b2 - lr * gb2
"""

# dropout's Philox stream: a seed past 2^63 (its high key word's top bit set) and counters crossing 2^32 (the
# counter's high word); an elementwise group, a softmax's row group, the replay in vjp and grad
DROPOUT_SEED, DROPOUT_OFFSET = 0xF123456789ABCDEF, 2 ** 32 - 100
AUTODIFF_XENT = """
from tessera import f32, function, grad, op, tensor, vjp

@function
def xent(Z: tensor[f32, "B", "C"], onehot: tensor[f32, "B", "C"]):
    return -op.mean(op.sum(onehot * op.log_softmax(Z), axis=-1))

@function
def rows(Z: tensor[f32, "B", "C"]):
    return op.log_softmax(Z), op.prod(Z, axis=-1)

dxent = grad(xent)
vjp_rows = vjp(rows)
"""

AUTODIFF_DROPOUT = f"""
from tessera import f32, function, grad, op, tensor, vjp

@function
def drop(X: tensor[f32, "A", "B", "C"]):
    return op.dropout(X * 2.0, 0.3, {DROPOUT_SEED}, offset={DROPOUT_OFFSET}) - 1.0

@function
def probs(X: tensor[f32, "R", "C"]):
    return op.dropout(op.softmax(X), 0.1, 7)

vjp_drop = vjp(drop)

@function
def loss(X: tensor[f32, 64, 48], V: tensor[f32, 64, 48]):
    return op.mean(op.tanh(op.dropout(X * 2.0, 0.25, 11, offset=5)) * V)

dloss = grad(loss)
"""

# flash attention's derivatives on sm_90a (tests/gpu/test_attention_bwd_gpu.py): the forward kernel writing the
# LSE and the backward kernels (backends/ptx/attention_bwd_sm90.py): dK and dV together, dQ, and one of dK or dV
ATTENTION_BWD = (REPO / "examples" / "gpu" / "attention_backward.py").read_text()


def _bf16_gemms(source: str) -> str:
    """examples/graph/train_mlp.py (or tests/unit/data_parallel_worker.py's program) with its two products
    multiplying bf16 (the f32 master values cast, f32 results), as the ptx GEMMs take no f32 operands; the rest
    of the program as written."""
    for f32_form, bf16_form in (("from tessera import f32,", "from tessera import bf16, f32,"),
                                ("X @ W1", "op.matmul(op.cast(X, bf16), op.cast(W1, bf16), out_dtype=f32)"),
                                ("H @ W2", "op.matmul(op.cast(H, bf16), op.cast(W2, bf16), out_dtype=f32)")):
        if source.count(f32_form) != 1:
            raise ValueError(f"the program changed: '{f32_form}' is not there once; update _bf16_gemms")
        source = source.replace(f32_form, bf16_form)
    return source


TRAIN_MLP_BF16 = _bf16_gemms((REPO / "examples" / "graph" / "train_mlp.py").read_text())

# the deterministic numerics profile's program (test_determinism_gpu.py): a bf16 GEMM (wgmma), row and column
# sums, a whole-tensor sum split over blocks, a softmax and elementwise exp and division
# flash attention on sm_80's mma.sync kernel (backends/ptx/attention_sm80.py): bf16 and f16, D 64 and 128,
# causal or not; and a head dimension it does not take (decomposed: two GEMMs and a softmax)
AMPERE_ATTENTION = "from tessera import bf16, f16, function, op, tensor\n" + "\n".join(
    f"""
@function
def {dt}_d{d}{'_causal' if causal else ''}(Q: tensor[{dt}, "B", "S", {d}], K: tensor[{dt}, "B", "T", {d}],
        V: tensor[{dt}, "B", "T", {d}]) -> tensor[{dt}, "B", "S", {d}]:
    return op.flash_attention(Q, K, V, causal={causal}, scale={d ** -0.5!r})
""" for dt in ("bf16", "f16") for d in (64, 128, 96) for causal in (False, True) if d != 96 or dt == "bf16")

DETERMINISTIC = """
@function
def prog(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"], X: tensor[f32, "R", "D"]):
    return (op.matmul(A, B), op.sum(X, axis=-1), op.sum(X, axis=0), op.sum(X), op.softmax(X),
            op.exp(X) / (X * X + 1.0))
"""

SPLIT_REDUCE = """
from tessera import bf16, f32, function, op, tensor

@function
def loss(E: tensor[f32, "T", "D"]):
    return op.mean(E * E)

@function
def whole(X: tensor[f32, "N", "D"], P: tensor[f32, "N", "D"]):
    return op.sum(X), op.max(X), op.min(X), op.prod(P)

@function
def rows(X: tensor[bf16, "N", "D"]):
    return op.sum(X, axis=-1), op.mean(X, axis=-1)
"""

# reductions over axes that are not all trailing, in place (kernelgen._strided_reduce: a bias's gradient;
# test_strided_reduce_gpu.py)
STRIDED_REDUCE = """
from tessera import f32, function, op, tensor

@function
def leading(X: tensor[f32, "A", "B", "C"]):
    return op.sum(X, axis=0), op.mean(X, axis=(0, 1)), op.max(X, axis=(0, 2)), op.min(X, axis=1)
"""

# GEMMs reading a stored transpose in place (tessera.transpose_a/_b: test_transposed_gemm_gpu.py)
TRANSPOSED_GEMM = """
from tessera import bf16, f16, f32, function, op, tensor

@function
def nn(A: tensor[bf16, "M", "K"], B: tensor[bf16, "K", "N"]):
    return A @ B

@function
def tn(A: tensor[bf16, "K", "M"], B: tensor[bf16, "K", "N"]):
    return op.transpose(A, (1, 0)) @ B

@function
def nt(A: tensor[bf16, "M", "K"], B: tensor[bf16, "N", "K"]):
    return A @ op.transpose(B, (1, 0))

@function
def tt(A: tensor[bf16, "K", "M"], B: tensor[bf16, "N", "K"]):
    return op.transpose(A, (1, 0)) @ op.transpose(B, (1, 0))

@function
def batched_tt(A: tensor[f16, "B", "K", "M"], B: tensor[f16, "B", "N", "K"]):
    return op.matmul(op.transpose(A, (0, 2, 1)), op.transpose(B, (0, 2, 1)), out_dtype=f32)

@function
def tn_bias_gelu(A: tensor[bf16, "K", "M"], B: tensor[bf16, "K", "N"], b: tensor[bf16, "N"]):
    return op.gelu(op.bias_add(op.transpose(A, (1, 0)) @ B, b))
"""

GEMM_F32 = """
@function
def gemm(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]) -> tensor[f32, "M", "N"]:
    return op.matmul(A, B)


@function
def linear_gelu(X: tensor[f32, "T", "D"], W: tensor[f32, "D", "F"], b: tensor[f32, "F"]) -> tensor[f32, "T", "F"]:
    return op.gelu(op.bias_add(op.matmul(X, W), b))


@function
def scaled_residual(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"], R: tensor[f32, "M", "N"]):
    return op.matmul(A, B) * 0.5 + R


@function
def batched(A: tensor[f32, "B", "M", "K"], B: tensor[f32, "B", "K", "N"]) -> tensor[f32, "B", "M", "N"]:
    return A @ B


@function(input_precision="tf32")
def gemm_tf32(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]) -> tensor[f32, "M", "N"]:
    return op.matmul(A, B)


@function(input_precision="tf32")
def linear_tf32(X: tensor[f32, "T", 264], W: tensor[f32, 264, "F"], b: tensor[f32, "F"]) -> tensor[f32, "T", "F"]:
    return op.gelu(op.bias_add(op.matmul(X, W), b))


@function(input_precision="tf32")
def residual_tf32(A: tensor[f32, "M", 136], B: tensor[f32, 136, "N"], R: tensor[f32, "M", "N"]):
    return op.matmul(A, B) * 0.5 + R


@function(input_precision="tf32")
def batched_tf32(A: tensor[f32, "B", "M", 72], B: tensor[f32, "B", 72, "N"]) -> tensor[f32, "B", "M", "N"]:
    return A @ B


@function(input_precision="tf32")
def odd_n_tf32(A: tensor[f32, "M", 264], B: tensor[f32, 264, 70]) -> tensor[f32, "M", 70]:
    return op.matmul(A, B)


@function(input_precision="tf32")
def relu_bf16_tf32(A: tensor[f32, "M", 96], B: tensor[f32, 96, "N"]) -> tensor[bf16, "M", "N"]:
    return op.relu(op.matmul(A, B, out_dtype=bf16))
"""

SOURCES = {
    "saxpy": ((REPO / "examples" / "saxpy.py").read_text(), "sm_80"),
    "saxpy_sm90a": ((REPO / "examples" / "saxpy.py").read_text(), "sm_90a"),
    # elementwise kernels the compiler coarsens to 16 bytes a thread (passes/simt_coarsen.py): 16-bit, mixed
    "coarsened": ("""
from tessera import f16, kernel, launch, tensor

@kernel
def halves(X: tensor[f16, "N"], Out: tensor[f16, "N"], n: int):
    i = launch.thread_id()
    if i < n:
        Out[i] = X[i] * X[i] + X[i]

@kernel
def widen(X: tensor[f16, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = float(X[i]) * 2.0
""", "sm_80"),
    "shuffles": ((REPO / "examples" / "warp_ops.py").read_text(), "sm_80"),
    "rows": ("""
@function
def f(X: tensor[f32, "N", "D"], g: tensor[f32, "D"], b: tensor[f32, "D"]):
    return op.softmax(X), op.layernorm(X, gamma=g, beta=b), op.rmsnorm(X, gamma=g)
""", "sm_80"),
    "mlp_tail": ("""
@function
def f(X: tensor[f32, "T", "D"], b: tensor[f32, "D"], g: tensor[f32, "D"]):
    h = op.gelu(op.bias_add(X, b))
    return op.layernorm(h + X, gamma=g, beta=b), op.softmax(h)
""", "sm_80"),
    "elementwise": ("""
@function
def f(X: tensor[f32, "N", "D"], b: tensor[f32, "D"]):
    return op.log(op.exp(op.tanh(op.gelu(op.bias_add(X, b)) * 0.5) * 3.0) + 2.0)
""", "sm_80"),
    # the strict numerics profile's program (test_strict_gpu.py), compiled for ptx and (CPU_TWINS) the CPU:
    # f64-computed math, division, contraction-free arithmetic, reductions, softmax, layernorm, the SIMT GEMM
    "strict_golden": ("""
@function
def maths(X: tensor[f32, "N", "D"], Y: tensor[f32, "N", "D"]):
    return op.exp(X), op.erf(X), op.tanh(X), X / Y, op.log(op.abs(X)), op.sqrt(op.abs(X)), X * Y + Y, X ** Y

@function
def rows(X: tensor[f32, "N", "D"], g: tensor[f32, "D"], b: tensor[f32, "D"]):
    return op.sum(X, axis=-1), op.max(X, axis=-1), op.softmax(X), op.layernorm(X, gamma=g, beta=b)

@function
def whole(X: tensor[f32, "N", "D"]):
    return op.sum(X, axis=0), op.sum(X)

@function
def gemm(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"], b: tensor[f32, "N"]):
    return op.matmul(A, B), op.gelu(op.matmul(A, B) + b)
""", "sm_80"),
    # the Hopper tensor-core kernels (backends/ptx/gemm_sm90.py, attention_sm90.py)
    "hopper_gemm": ((REPO / "examples" / "gpu" / "gemm.py").read_text(), "sm_90a"),
    # the same, its bf16/f16 GEMMs in clusters of two CTAs (compile_env.py: TESSERA_SM90_GEMM_CLUSTER=2)
    "hopper_gemm_cluster": ((REPO / "examples" / "gpu" / "gemm.py").read_text(), "sm_90a"),
    # the same, its fp8 GEMMs with 16-bit results in 128x256 tiles promoted by halves of N (compile_env.py:
    # TESSERA_SM90_GEMM_FP8_BN=256)
    "hopper_gemm_fp8_wide": ((REPO / "examples" / "gpu" / "gemm.py").read_text(), "sm_90a"),
    # and the same with A read into registers once a K step (TESSERA_SM90_GEMM_FP8_BN=256rs)
    "hopper_gemm_fp8_wide_rs": ((REPO / "examples" / "gpu" / "gemm.py").read_text(), "sm_90a"),
    # and the default fp8 tiles promoting every K step (TESSERA_SM90_GEMM_FP8_PROMOTE=1; the default for 16-bit
    # results promotes every second one)
    "hopper_gemm_fp8_promote1": ((REPO / "examples" / "gpu" / "gemm.py").read_text(), "sm_90a"),
    "hopper_attention": ((REPO / "examples" / "gpu" / "attention.py").read_text(), "sm_90a"),
    "ampere_attention": (AMPERE_ATTENTION, "sm_80"),
    "hopper_attention_bwd": (ATTENTION_BWD, "sm_90a"),
    "hopper_gemm_transposed": (TRANSPOSED_GEMM, "sm_90a"),
    # a transformer block's parts (test_block_parts_gpu.py): the head split and merge as row copies, GEMM
    # epilogues whose activations divide (div.approx)
    "block_parts": ("""
@function
def heads(X: tensor[bf16, "B", "S", "H", 128]):
    return op.transpose(X, (0, 2, 1, 3))

@function
def merge(X: tensor[bf16, "B", "H", "S", 128]):
    return op.reshape(op.transpose(X, (0, 2, 1, 3)), ("B", "S", -1))

@function
def linear_gelu(X: tensor[bf16, "T", "D"], W: tensor[bf16, "D", "F"], b: tensor[bf16, "F"]):
    return op.gelu(op.bias_add(X @ W, b))

@function
def linear_silu(X: tensor[bf16, "T", "D"], W: tensor[bf16, "D", "F"], b: tensor[bf16, "F"]):
    return op.silu(op.bias_add(X @ W, b))

@function
def linear_sigmoid(X: tensor[bf16, "T", "D"], W: tensor[bf16, "D", "F"], b: tensor[bf16, "F"]):
    return op.sigmoid(op.bias_add(X @ W, b))

@function
def linear_tanh(X: tensor[bf16, "T", "D"], W: tensor[bf16, "D", "F"], b: tensor[bf16, "F"]):
    return op.tanh(op.bias_add(X @ W, b))
""", "sm_90a"),
    # attention over [B, S, H, D] heads (test_attention_seq_heads_gpu.py): the split and merge transposes folded
    # into the kernel's 4-D TMA maps; `plain` takes [B, H, S, D] (the kernel's 3-D maps) for a bitwise comparison
    "hopper_attention_seq_heads": ("""
@function
def causal(Q: tensor[bf16, "B", "S", "H", 128], K: tensor[bf16, "B", "S", "H", 128],
           V: tensor[bf16, "B", "S", "H", 128]):
    A = op.flash_attention(op.transpose(Q, (0, 2, 1, 3)), op.transpose(K, (0, 2, 1, 3)),
                           op.transpose(V, (0, 2, 1, 3)), causal=True, scale=0.08838834764831845)
    return op.transpose(A, (0, 2, 1, 3))

@function
def cross(Q: tensor[bf16, "B", "S", "H", 64], K: tensor[bf16, "B", "T", "H", 64], V: tensor[bf16, "B", "T", "H", 64]):
    A = op.flash_attention(op.transpose(Q, (0, 2, 1, 3)), op.transpose(K, (0, 2, 1, 3)),
                           op.transpose(V, (0, 2, 1, 3)), causal=False, scale=0.125)
    return op.transpose(A, (0, 2, 1, 3))

@function
def plain_causal(Q: tensor[bf16, "B", "H", "S", 128], K: tensor[bf16, "B", "H", "S", 128],
                 V: tensor[bf16, "B", "H", "S", 128]):
    return op.flash_attention(Q, K, V, causal=True, scale=0.08838834764831845)

@function
def plain_cross(Q: tensor[bf16, "B", "H", "S", 64], K: tensor[bf16, "B", "H", "T", 64],
                V: tensor[bf16, "B", "H", "T", 64]):
    return op.flash_attention(Q, K, V, causal=False, scale=0.125)
""", "sm_90a"),
    # fp8 GEMMs: held as f16 (exact), packed to one-byte K-major operands, multiplied by wgmma's fp8 kinds
    "hopper_fp8": ("""
@function
def gemm_e4m3(A: tensor[fp8_e4m3, "M", "K"], B: tensor[fp8_e4m3, "K", "N"]):
    return op.matmul(A, B)

@function
def gemm_e5m2(A: tensor[fp8_e5m2, "M", "K"], B: tensor[fp8_e5m2, "K", "N"]):
    return op.matmul(A, B)

@function
def batched_e4m3(A: tensor[fp8_e4m3, "B", "M", "K"], B: tensor[fp8_e4m3, "B", "K", "N"]):
    return op.matmul(A, B)

@function
def linear_gelu_e4m3(X: tensor[fp8_e4m3, "T", "D"], W: tensor[fp8_e4m3, "D", "F"], b: tensor[bf16, "F"]):
    return op.gelu(op.bias_add(op.matmul(X, W, out_dtype=bf16), b))
""", "sm_90a"),
    # int8 GEMMs (i8 x i8 -> i32) on wgmma's s8 kind, which reads A [M, K] and B as [N, K]: a B [K, N] and an Aᵀ
    # are copied so first, A and a Bᵀ read as stored
    "hopper_int8": ("""
@function
def mm(A: tensor[i8, "M", "K"], B: tensor[i8, "K", "N"]):
    return A @ B

@function
def nt(A: tensor[i8, "M", "K"], Bt: tensor[i8, "N", "K"]):
    return A @ op.transpose(Bt)

@function
def tn(At: tensor[i8, "K", "M"], B: tensor[i8, "K", "N"]):
    return op.transpose(At) @ B

@function
def batched(A: tensor[i8, "B", "M", "K"], B: tensor[i8, "B", "K", "N"]):
    return A @ B
""", "sm_90a"),
    # derivatives (passes/autodiff.py) on the GPU, tests/gpu/test_autodiff_gpu.py: f32 rows, reductions and
    # elementwise ops on sm_80, dropout and its replay (Philox, as in the interpreter), bf16 GEMM operands (f32
    # master values cast to bf16, out_dtype f32) on mma.sync (sm_80) and wgmma (sm_90a), and an MLP training
    # step as one @function
    "autodiff_f32": (AUTODIFF_F32, "sm_80"),
    "autodiff_dropout": (AUTODIFF_DROPOUT, "sm_80"),
    "autodiff_bf16": (AUTODIFF_BF16, "sm_80"),
    "autodiff_bf16_sm90a": (AUTODIFF_BF16, "sm_90a"),
    "autodiff_mlp": (AUTODIFF_MLP, "sm_80"),
    # the training loops of examples/graph (tests/gpu/test_training_gpu.py) on wgmma: train_mlp.py's SGD and
    # Adam steps with bf16 GEMMs, train_transformer.py as written (its GEMMs are bf16 already)
    "train_mlp_sm90a": (TRAIN_MLP_BF16, "sm_90a"),
    "train_transformer_sm90a": ((REPO / "examples" / "graph" / "train_transformer.py").read_text(), "sm_90a"),
    # log_softmax's row kernel, a cross-entropy's gradient and prod's at zeros (test_log_softmax_gpu.py)
    "autodiff_xent": (AUTODIFF_XENT, "sm_80"),
    # reductions of few, long rows split into chunks (kernelgen.SPLIT_CHUNK; test_split_reduce_gpu.py)
    "split_reduce": (SPLIT_REDUCE, "sm_90a"),
    # compiled under the deterministic numerics profile (OPTIONS): test_determinism_gpu.py; the attention
    # backward adds dQ in a kernel of its own there, never by atomics
    "deterministic_sm90a": (DETERMINISTIC, "sm_90a"),
    "deterministic_attention_bwd": (ATTENTION_BWD, "sm_90a"),
    "strided_reduce": (STRIDED_REDUCE, "sm_80"),
    # whole programs for tests/c/host_programs.c (test_program_hosts.py): mlp.py's mlp_block alone (OPTIONS; its
    # swiglu multiplies f32, which the ptx GEMMs refuse) and the transformer block (flash attention: sm_90a)
    "graph_mlp": ((REPO / "examples" / "graph" / "mlp.py").read_text(), "sm_80"),
    "transformer_block": ((REPO / "examples" / "graph" / "transformer_block.py").read_text(), "sm_90a"),
    # atomics and fences: the kernels of tests/unit/test_atomics.py, and the two examples (test_atomics_gpu.py)
    "atomics": ((REPO / "tests" / "unit" / "atomic_kernels.py").read_text(), "sm_80"),
    "histogram": ((REPO / "examples" / "tile" / "histogram.py").read_text(), "sm_80"),
    "scatter_add": ((REPO / "examples" / "tile" / "scatter_add.py").read_text(), "sm_80"),
    # barriers, cooperative groups and lane reductions (test_groups_gpu.py), for sm_80 and sm_90a
    "groups": ((REPO / "tests" / "unit" / "group_kernels.py").read_text(), "sm_80"),
    "groups_sm90a": ((REPO / "tests" / "unit" / "group_kernels.py").read_text(), "sm_90a"),
    "cooperative": ((REPO / "examples" / "tile" / "cooperative.py").read_text(), "sm_80"),
    # the spec's tile programs (cp_async, alloc_shared, barrier, mma) at whole tiles (test_tile_programs_gpu.py)
    "execution_model": ((REPO / "examples" / "tile" / "execution_model.py").read_text(), "sm_80"),
    "execution_model_sm90a": ((REPO / "examples" / "tile" / "execution_model.py").read_text(), "sm_90a"),
    # the mma.sync/cp.async GEMM of sm_80 … sm_90 (backends/ptx/gemm_sm80.py), as PTX for sm_80 and for sm_90
    "ampere_gemm": ((REPO / "examples" / "gpu" / "gemm_ampere.py").read_text(), "sm_80"),
    # f32 GEMMs on FMA units and, by input_precision="tf32", tensor cores (test_gemm_f32_gpu.py)
    "gemm_f32": (GEMM_F32, "sm_80"),
    "gemm_f32_sm90a": (GEMM_F32, "sm_90a"),
    "ampere_gemm_sm90": ((REPO / "examples" / "gpu" / "gemm_ampere.py").read_text(), "sm_90"),
    # compiled with bounds checks (OPTIONS): saxpy as in "saxpy", and kernels that write one past the end
    "bounds_checked": ((REPO / "examples" / "saxpy.py").read_text() + """

@kernel
def shift_right(X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i + 1] = X[i]


@kernel
def shift_right_guarded(X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if i + 1 < Out.shape[0]:
        Out[i + 1] = X[i]
""", "sm_80"),
    # names PTX cannot spell (mangled .entry, backends/symbol_names.py), with bounds checks (OPTIONS)
    # int4 quantize/dequantize (test_quantize_i4_gpu.py), compiled for ptx and (CPU_TWINS) the CPU
    "quantize_i4": ((REPO / "tests" / "unit" / "quantize_i4_programs.py").read_text(), "sm_80"),
    "unicode_names": ("""
from tessera import kernel, launch, tensor, function, op


@kernel
def café(a: float, X: tensor[float], Y: tensor[float], Out: tensor[float]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i] = a * X[i] + Y[i]


@kernel
def décalé(X: tensor[float, "N"], Out: tensor[float, "N"]):
    i = launch.thread_id()
    if i < X.shape[0]:
        Out[i + 1] = X[i]


@function
def 数据(A: tensor[f32, "M"], B: tensor[f32, "M"]):
    return op.relu(A) * B + 1.0
""", "sm_80"),
}
# the same programs on sm_80's mma.sync kernel (backends/ptx/attention_sm80.py reads and writes the rows of
# [B, S, H, D] with cp.async and computed addresses)
SOURCES["ampere_attention_seq_heads"] = (SOURCES["hopper_attention_seq_heads"][0], "sm_80")
# op.flash_attention_fp8 on e4m3 inputs with their descales (test_attention_fp8_gpu.py): the Vt kernel and the
# e4m3 attention of examples/gpu/attention.py's fp8 functions, without their amax and quantize kernels
SOURCES["hopper_attention_fp8_inputs"] = ("""
@function
def fp8_inputs(Q: tensor[fp8_e4m3, "B", "H", "S", 128], K: tensor[fp8_e4m3, "B", "H", "T", 128],
               V: tensor[fp8_e4m3, "B", "H", "T", 128], sq: tensor[f32], sk: tensor[f32], sv: tensor[f32]):
    return op.flash_attention_fp8(Q, K, V, scale=(sq, sk, sv))

@function
def causal_fp8_inputs(Q: tensor[fp8_e4m3, "B", "H", "S", 128], K: tensor[fp8_e4m3, "B", "H", "T", 128],
                      V: tensor[fp8_e4m3, "B", "H", "T", 128], sq: tensor[f32], sk: tensor[f32], sv: tensor[f32]):
    return op.flash_attention_fp8(Q, K, V, scale=(sq, sk, sv), causal=True)
""", "sm_90a")

# Compile options beyond target and arch, by program.
OPTIONS = {"bounds_checked": {"gpu_bounds_checks": True}, "graph_mlp": {"kernels": ("mlp_block",)},
           "unicode_names": {"gpu_bounds_checks": True}, "deterministic_sm90a": {"numerics": "deterministic"},
           "deterministic_attention_bwd": {"numerics": "deterministic"}, "strict_golden": {"numerics": "strict"}}
# SOURCES also compiled for the CPU (build_images.py: NAME.cpu.tessera, for a baseline x86-64, as the device's
# CPU may lack the build machine's features), to compare their bits with the GPU's
CPU_TWINS = ("strict_golden", "quantize_i4")

# Programs of several modules, linked by tessera-link: {name: {module: source}}, the first module calling an
# export of the others. Built per target (ptx at LINKED_ARCH, and cpu for the comparison on the host).
LINKED = {
    "linked_head": {
        "model": """
from tessera import f32, function, op, tensor
from blocks import norm_gate


@function(export=True)
def head(X: tensor[f32, "R", "C"], g: tensor[f32, "C"]):
    return op.relu(norm_gate(X + 1.0, g)) * 2.0
""",
        "blocks": """
from tessera import f32, function, op, tensor


@function(export=True)
def norm_gate(X: tensor[f32, "R", "C"], g: tensor[f32, "C"]):
    return op.layernorm(X) * g
""",
    },
}
LINKED_ARCH = "sm_80"


def build_cpu(name: str) -> bytes:
    """The CPU image of SOURCES[name] (needs the compiler), for a baseline x86-64 (see CPU_TWINS)."""
    from tessera import compiler
    from tessera.options import CompileOptions
    return compiler.compile_source(SOURCES[name][0], f"{name}.py",
                                   CompileOptions(cpu="x86-64-v2", **OPTIONS.get(name, {}))).image


def build_linked(name: str, target: str, workdir) -> bytes:
    """The linked image of LINKED[name] for `target` ("ptx" or "cpu"): each module compiled apart, then linked
    (needs the compiler)."""
    import pathlib

    from tessera import compiler
    from tessera.options import CompileOptions
    from tessera.tools import link

    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    for module, source in LINKED[name].items():
        (workdir / f"{module}.py").write_text(source)
    # the cpu image may run on another machine than the one building it (the GPU machine): a baseline x86-64
    options = CompileOptions(target="ptx", arch=LINKED_ARCH) if target == "ptx" else CompileOptions(cpu="x86-64-v2")
    inputs = [link._read_bytes(f"{module}.tessera",
                               compiler.compile_file(str(workdir / f"{module}.py"), options).image)
              for module in LINKED[name]]
    return link.link(inputs)

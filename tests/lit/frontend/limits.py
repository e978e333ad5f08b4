# Silly but valid programs are refused at their line, quickly, instead of hanging the compiler or exhausting
# its memory: hints have ranges, constant expressions have limits, loops unroll a bounded number of times.
# Unused module-level constants are never evaluated (the first two lines would take minutes and forever).
# RUN: tessera-cc %s --kernel unused_constants -o %t
# RUN: not tessera-cc %s --kernel many_stages -o %t 2>&1 | FileCheck %s --check-prefix=STAGES
# RUN: not tessera-cc %s --kernel wide_vector -o %t 2>&1 | FileCheck %s --check-prefix=VECTOR
# RUN: not tessera-cc %s --kernel huge_tile -o %t 2>&1 | FileCheck %s --check-prefix=TILE
# RUN: not tessera-cc %s --kernel huge_power -o %t 2>&1 | FileCheck %s --check-prefix=POWER
# RUN: not tessera-cc %s --kernel huge_shift -o %t 2>&1 | FileCheck %s --check-prefix=SHIFT
# RUN: not tessera-cc %s --kernel long_scan -o %t 2>&1 | FileCheck %s --check-prefix=SCAN
# RUN: not tessera-cc %s --kernel long_sequence -o %t 2>&1 | FileCheck %s --check-prefix=SEQUENCE
# RUN: not tessera-cc %s --kernel long_loop -o %t 2>&1 | FileCheck %s --check-prefix=LOOP

from tessera import function, kernel, launch

x = 9 ** 9 ** 9
y = max(range(10**18))


@function
def unused_constants(A: tensor[f32, "M", "K"]):
    return A


# STAGES: limits.py:[[# @LINE + 1]]:18: error: stages= takes a positive integer up to 16, not 1000000
@function(stages=1000000)
def many_stages(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]):
    return A @ B


# VECTOR: limits.py:[[# @LINE + 1]]:18: error: vector= takes a positive integer, a power of two up to 64, not 1048576
@function(vector=1048576)
def wide_vector(A: tensor[f32, "M", "K"]):
    return A


# TILE: limits.py:[[# @LINE + 1]]:16: error: tile= takes three positive sizes (M, N, K) or {M:, N:, K:}, each at most 4096
@function(tile=(1000000000, 64, 64))
def huge_tile(A: tensor[f32, "M", "K"], B: tensor[f32, "K", "N"]):
    return A @ B


@kernel
def huge_power(X: tensor[float]):
    i = launch.thread_id()
    # POWER: limits.py:[[# @LINE + 1]]:12: error: a power of more than 64 bits
    X[i] = 9 ** 9 ** 9


@kernel
def huge_shift(X: tensor[float]):
    i = launch.thread_id()
    # SHIFT: limits.py:[[# @LINE + 1]]:12: error: a shift to more than 64 bits
    X[i] = 1 << 10**18


@function
def long_scan(A: tensor[f32, "M", "K"]):
    # SCAN: limits.py:[[# @LINE + 1]]:9: error: max(): the argument has more than 65536 items
    n = max(range(10**18))
    return A


@function
def long_sequence(A: tensor[f32, "M", "K"]):
    # SEQUENCE: limits.py:[[# @LINE + 1]]:9: error: a constant sequence of more than 65536 items
    s = 10**9 * "ab"
    return A


@function
def long_loop(A: tensor[f32, "M", "K"]):
    for i in range(64):
        # LOOP: limits.py:[[# @LINE + 1]]:18: error: a function unrolls its loops: at most 4096 iterations in all
        for j in range(64):
            A = A + 1.0
    return A

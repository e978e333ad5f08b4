# A mistake in a kernel is reported at the user's file:line:col, and tessera-cc exits non-zero.
# RUN: not tessera-cc %s --kernel undefined_name -o %t 2>&1 | FileCheck %s --check-prefix=NAME
# RUN: not tessera-cc %s --kernel float_index -o %t 2>&1 | FileCheck %s --check-prefix=INDEX
# RUN: not tessera-cc %s --kernel bad_rank -o %t 2>&1 | FileCheck %s --check-prefix=RANK
# RUN: not tessera-cc %s --kernel while_loop -o %t 2>&1 | FileCheck %s --check-prefix=WHILE
# RUN: not tessera-cc %s --kernel divergent_loop -o %t 2>&1 | FileCheck %s --check-prefix=DIVERGE
# RUN: not tessera-cc %s --kernel no_such_kernel -o %t 2>&1 | FileCheck %s --check-prefix=MISSING

from tessera import kernel, launch


@kernel
def undefined_name(X, Out):
    # NAME: errors.py:[[# @LINE + 1]]:14: error: name 'y' is not defined in this kernel
    Out[0] = y


@kernel
def float_index(X, Out):
    # INDEX: errors.py:[[# @LINE + 1]]:9: error: a f32 value needs an explicit conversion to index
    Out[X[0]] = 1.0


@kernel
def bad_rank(A: tensor[float, "M", "N"], Out):
    # RANK: errors.py:[[# @LINE + 1]]:16: error: 'A' has rank 2 but is indexed with 1 indices
    Out[0] = A[0]


@kernel
def while_loop(X, Out):
    # WHILE: errors.py:[[# @LINE + 1]]:5: error: 'while' loops are not supported in a kernel
    while True:
        pass


@kernel
def divergent_loop(X, Out):
    i = launch.thread_id()
    acc = 0.0
    # DIVERGE: errors.py:[[# @LINE + 1]]:5: error: a loop's bounds must be the same on every lane of a warp
    for k in range(i):
        acc += X[k]
    Out[i] = acc

# MISSING: error: no @kernel or @function named no_such_kernel in this file

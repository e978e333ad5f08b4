# A Python syntax error is reported at its file:line:col.
# RUN: not tessera-cc %s -o %t 2>&1 | FileCheck %s
# CHECK: syntax-error.py:[[# @LINE + 3]]:{{[0-9]+}}: error:

@kernel
def broken(X, Out)
    Out[0] = X[0]

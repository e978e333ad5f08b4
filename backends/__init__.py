"""Code generators, one package per target: target description, lowering to Target IR, machine code."""

# Uneven row chunks: collective_chunks (tessera-cc --collective-chunks 6:6:3:1) or op.all_reduce(chunks=(…)) as
# positive int weights mark the all_reduce tessera.chunks = k with tessera.chunk_weights beside it; equal
# weights are k equal chunks (no weights attribute). Graph lowering ends chunk i at row
# min(ceil(T*(w_0+…+w_i)/(W*128))*128, T) (W: the weights' sum), so only the chunk reaching T is partial: the
# plan's alias offsets (rows times the 24 columns) say so; T=8192 with 6:6:3:1 gives chunks of 3072, 3072, 1536
# and 512 rows. Bad weights are refused: the option's, the pass option's, and an own chunks= at its line.
# RUN: tessera-cc %s --collective-chunks 6:6:3:1 --compile-to=canonical | FileCheck %s --check-prefix=IR
# RUN: tessera-cc %s --collective-chunks 2:2:2 --compile-to=canonical | FileCheck %s --check-prefix=EVEN
# RUN: rm -f %t.tessera && tessera-cc %s --collective-chunks 6:6:3:1 -o %t.tessera
# RUN: %python -c "import json, sys; from tessera.image import read_image; from tessera import plan; \
# RUN:   (f,) = json.loads(read_image(open(sys.argv[1], 'rb').read()).plan)['functions'].values(); \
# RUN:   offs = [s['offset'] for s in f['steps'] if s.get('alias', '').endswith('_reduced')]; \
# RUN:   print('\n'.join(offs)); \
# RUN:   [print('T', t, 'rows', [plan.evaluate(o, {'T': t}) // 24 for o in offs]) for t in (8192, 300, 100)]" \
# RUN:   %t.tessera | FileCheck %s --check-prefix=PLAN
# RUN: not tessera-cc %s --collective-chunks 6:0:1 --compile-to=canonical 2>&1 | FileCheck %s --check-prefix=ZERO
# RUN: not tessera-cc %s --collective-chunks 6:x --compile-to=canonical 2>&1 | FileCheck %s --check-prefix=NONINT
# RUN: not tessera-opt %S/pipeline-collectives.mlir --pass-pipeline='builtin.module(tessera-pipeline-collectives{chunks=3:-1})' 2>&1 | FileCheck %s --check-prefix=PASS

# IR-LABEL: func.func @mlp(
# IR:         "ttensor.unary"({{.*}}) {fn = "gelu", tessera.chunk_rows = 4 : i64}
# IR:         "tdist.all_reduce"({{.*}}tessera.chunk_weights = [6, 6, 3, 1], tessera.chunks = 4 : i64}
# EVEN-LABEL: func.func @mlp(
# EVEN-NOT:     tessera.chunk_weights
# EVEN:         "tdist.all_reduce"({{.*}}tessera.chunks = 3 : i64}
# PLAN:      0
# PLAN-NEXT: (min(ceil(((T)*6)/2048)*128, T))*(24)
# PLAN-NEXT: (min(ceil(((T)*12)/2048)*128, T))*(24)
# PLAN-NEXT: (min(ceil(((T)*15)/2048)*128, T))*(24)
# PLAN-NEXT: T 8192 rows [0, 3072, 6144, 7680]
# PLAN-NEXT: T 300 rows [0, 128, 256, 300]
# PLAN-NEXT: T 100 rows [0, 100, 100, 100]
# ZERO: collective_chunks' weights must be a non-empty tuple of positive ints, not (6, 0, 1)
# NONINT: expected a count or weights like 6:6:3:1, not '6:x'
# PASS: tessera-pipeline-collectives: chunk weights must be positive ints, got (3, -1)

from tessera import dist, f32, function, op, tensor

mesh = dist.Mesh(axes=["tp"], devices=range(2))


@function
def mlp(X: tensor[f32, "T", 24], W1: dist.shard(tensor[f32, 24, 48], mesh, axis="tp", dim=1),
        W2: dist.shard(tensor[f32, 48, 24], mesh, axis="tp", dim=0)):
    return op.all_reduce(op.gelu(X @ W1) @ W2, mesh=mesh)

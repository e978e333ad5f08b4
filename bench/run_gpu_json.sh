#!/bin/bash
# The GPU benchmarks docs/performance.md charts, each writing its results as JSON (--json), for bench/charts.py.
#
#   bash bench/run_gpu_json.sh build DIR        # where the compiler is: DIR/src (HEAD, for the GPU machine's
#                                               # install), DIR/img (the benchmarks' sm_90a images), DIR/COMMIT
#   bash bench/run_gpu_json.sh run DIR OUT      # on the GPU machine (libtessera and PyTorch; no compiler needed):
#                                               # installs DIR/src, writes OUT/<bench>.json and OUT/<bench>.log
#   python bench/charts.py OUT/*.json           # back where matplotlib is: docs/figures/*.png
#
# With the device tool, from the repository root (DIR under gpu_lead/, which git ignores, so carry names it):
#   bash bench/run_gpu_json.sh build gpu_lead/charts
#   run(command='BUDGET=540 bash bench/run_gpu_json.sh run gpu_lead/charts $OUT', carry=['gpu_lead/charts'],
#       timeout_s=600)
# BUDGET (seconds, default 540) is shared out among the benchmarks in order; one that runs out of time keeps
# the rows it measured (the JSON is rewritten after each row). SIZES_GEMM, SIZES_F32, SHAPE_ATTENTION,
# SIZES_SAXPY and SIZES_INT8 override the sizes below.
set -u
mode=${1:?usage: run_gpu_json.sh build DIR | run DIR OUT}
dir=${2:?usage: run_gpu_json.sh build DIR | run DIR OUT}

if [ "$mode" = build ]; then
  set -e
  root=$(cd "$(dirname "$0")/.." && pwd)
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  rm -rf "$dir/src" "$dir/img" && mkdir -p "$dir/src" "$dir/img"
  cd "$root"
  git archive HEAD | tar -x -C "$dir/src"
  # The commit the numbers will belong to: the device's copy of the tree has no .git.
  echo "$(git rev-parse --short=10 HEAD)$(git diff --quiet HEAD -- . ':!gpu_lead' || echo -dirty)" > "$dir/COMMIT"
  python bench/gemm_gpu.py --build-image "$dir/img/gemm.tessera"
  # --f32 times its own image: one pair of functions (FMA, tf32) a size, K static
  python bench/gemm_gpu.py --f32 --build-image "$dir/img/f32.tessera" --sizes "${SIZES_F32:-4096}"
  python bench/attention_gpu.py --build-image "$dir/img/attention.tessera"
  python bench/saxpy_gpu.py --build-image "$dir/img/saxpy.tessera"
  python bench/int8_gemm_gpu.py --build-image "$dir/img/int8.tessera"
  echo "built $dir (commit $(cat "$dir/COMMIT")); on the GPU machine: bash bench/run_gpu_json.sh run $dir OUT"
  exit 0
fi

[ "$mode" = run ] || { echo "run_gpu_json.sh: unknown mode '$mode' (build or run)" >&2; exit 2; }
out=${3:?usage: run_gpu_json.sh run DIR OUT}
# It installs DIR/src over whatever tessera the environment has: never where the compiler's checkout is.
command -v nvidia-smi > /dev/null \
  || { echo "run_gpu_json.sh run: no nvidia-smi here; run it on the GPU machine" >&2; exit 2; }
dir=$(cd "$dir" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 TESSERA_BENCH_COMMIT=$(cat "$dir/COMMIT")
end=$(( $(date +%s) + ${BUDGET:-540} ))
python -m pip install -q --no-deps --no-build-isolation "$dir/src" > "$out/pip.log" 2>&1 \
  || { tail -30 "$out/pip.log"; exit 1; }
S=$dir/src/bench I=$dir/img
cd /tmp   # the installed tessera, not the source tree's

# bench NAME SHARE ARGS...: runs $S/NAME.py with ARGS and --json OUT/<json name>.json for at most SHARE seconds
# (fewer if the budget has less left).
bench() {
  local json=$1 share=$2 script=$3; shift 3
  local left=$(( end - $(date +%s) ))
  (( share > left )) && share=$left
  if (( share < 20 )); then echo "=== $json skipped: $left s left" | tee -a "$out/summary.txt"; return; fi
  echo "=== $json (limit $share s)" | tee -a "$out/summary.txt"
  timeout -k 5 "$share" python "$S/$script.py" "$@" --json "$out/$json.json" > "$out/$json.log" 2>&1
  echo "=== $json rc=$?" | tee -a "$out/summary.txt"
  tail -n 12 "$out/$json.log"
}
nvidia-smi -L | tee "$out/summary.txt"
bench gemm_gpu 140 gemm_gpu --image "$I/gemm.tessera" --sizes "${SIZES_GEMM:-2048,4096,8192}"
bench gemm_gpu_f32 45 gemm_gpu --f32 --image "$I/f32.tessera" --sizes "${SIZES_F32:-4096}"   # issue 18's FMA/tf32 rows
bench gemm_gpu_fp8 45 gemm_gpu --fp8 --image "$I/gemm.tessera" --sizes "${SIZES_GEMM:-4096,8192}"
bench attention_gpu 100 attention_gpu --image "$I/attention.tessera" --shape "${SHAPE_ATTENTION:-4,16,4096}"
bench attention_gpu_fp8 45 attention_gpu --fp8 --image "$I/attention.tessera" --shape "${SHAPE_ATTENTION:-4,16,4096}"
bench saxpy_gpu 50 saxpy_gpu --image "$I/saxpy.tessera" --sizes "${SIZES_SAXPY:-1048576,16777216,67108864,268435456}"
bench int8_gemm_gpu 50 int8_gemm_gpu --image "$I/int8.tessera" --sizes "${SIZES_INT8:-4096,8192}"
cat "$out/summary.txt"

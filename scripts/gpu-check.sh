#!/usr/bin/env bash
# Every check that needs a CUDA device, for a lent GPU machine, in two calls of under 10 minutes each
# (a device call is limited to 10 minutes): `scripts/gpu-check.sh` runs the checks that decide whether
# verdicts are true on a GPU (first, always); `scripts/gpu-check.sh --more` the benches, batch mode
# on every GPU and the user-model path.
#
# It installs nothing from the network: the evaluator needs only torch, ninja and pytest, which the
# GPU image has. KernelBench problems are the package's own copy (kevin_tui/kernelbench), or
# $KEVIN_TUI_KERNELBENCH.
# The report (nvidia-smi, pytest log, eval JSON, bench figures) goes to $OUT or ./gpu-report.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--prepare" ]; then  # on the developer machine (the problems ship in kevin_tui/kernelbench)
    mkdir -p .gpu-carry
    grep -qx '/.gpu-carry/' .git/info/exclude 2>/dev/null || echo '/.gpu-carry/' >> .git/info/exclude
    echo "carry .gpu-carry with the run"
    exit 0
fi

report="${OUT:-$PWD/gpu-report}"
mkdir -p "$report"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export KEVIN_TUI_TEST_CACHE="${KEVIN_TUI_TEST_CACHE:-/tmp/kevin-gpu-cache}"
export KEVIN_TUI_CACHE_DIR="$KEVIN_TUI_TEST_CACHE"
export MAX_JOBS="${MAX_JOBS:-16}"
status=0

{ nvidia-smi; python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"; } \
    > "$report/machine.txt" 2>&1

problem="kernelbench:level1/19"
if [ "${1:-}" != "--more" ]; then
timeout 75 python3 -m kevin_tui eval "$problem" tests/candidates/relu_cuda.py --json > "$report/eval-relu-cuda.json" \
    2> "$report/eval-relu-cuda.stderr"
echo "eval relu_cuda exit $?"; head -c 600 "$report/eval-relu-cuda.json"; echo
python3 -c "import json, sys; print('ncu:', json.load(open(sys.argv[1])).get('evidence', {}).get('ncu'))" \
    "$report/eval-relu-cuda.json" 2>&1 | head -c 1500; echo
command -v bwrap >/dev/null 2>&1 || echo "bwrap missing: the sandbox tests will use the unshare fallback" >&2
timeout 360 python3 -m pytest -v -p no:cacheprovider -o addopts="" \
    tests/test_gpu.py tests/test_builds.py tests/test_sandbox_escape.py 2>&1 | tee "$report/pytest.log" | tail -40
[ "${PIPESTATUS[0]}" = 0 ] || status=1
# How far an identical kernel's speedup strays on this GPU (interval excluding 1.0 = a false claim)
timeout 90 python3 bench/trust_bench.py --device cuda --aa 5 --problem "$problem" 2>&1 | tee "$report/aa.txt" | tail -8
exit $status
fi

timeout 60 python3 bench/eval_bench.py --device cuda --candidate tests/candidates/relu_cuda.py --problem "$problem" \
    2>&1 | tee "$report/bench.txt" | tail -25
# batch mode on the GPU: kernels timed on every visible device at once (one at a time per device),
# scripted replies, the report's figures and the RL export
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
devices=$(seq -s, 0 $((gpus > 0 ? gpus - 1 : 0)) | sed 's/\([0-9]\+\)/cuda:\1/g')
python3 -c "from pathlib import Path; from tests.batch_problems import PLANS, write_script; \
write_script(Path('$report/batch-script.json'), PLANS[:3], turns=2)"
timeout 90 python3 -m kevin_tui batch $(python3 -c "from tests.batch_problems import PLANS; print(*[p.path for p in PLANS[:3]])") \
    --out "$report/batch-run" --trajectories 2 --turns 2 --backend scripted --script "$report/batch-script.json" \
    --sampling-seed 0 --eval-devices "$devices" --no-live --progress-every 20 --export "$report/batch-rl.jsonl" \
    > "$report/batch.txt" 2>&1
echo "batch on $devices exit $?"; tail -30 "$report/batch.txt"

# Your own model on the GPU (examples/tinylm): the profile ranks by kernel time, the CUDA GeluGate kernel is
# checked in the whole model; then the figures (profiler overhead, the kernel alone and end to end)
timeout 150 python3 -m pytest -v -p no:cacheprovider -o addopts="" -m gpu tests/test_usermodel.py 2>&1 \
    | tee "$report/usermodel-pytest.log" | tail -12
[ "${PIPESTATUS[0]}" = 0 ] || status=1
timeout 120 python3 bench/usermodel_bench.py --device cuda --tokens 8,512 2>&1 | tee "$report/usermodel-bench.txt" | tail -6
exit $status

#!/usr/bin/env bash
# Every check that needs a CUDA device, in one call of about five minutes on a lent GPU machine.
#
#   scripts/gpu-check.sh --prepare    here: fill .gpu-carry/ with what the GPU image lacks (wheels,
#                                     bubblewrap); carry it with the run (carry: [".gpu-carry"]). The
#                                     problems are the package's own (kevin_tui/kernelbench).
#   scripts/gpu-check.sh              there: the checks, most decisive first, each with its own budget
#   scripts/gpu-check.sh --rehearse   here: the same steps on the CPU in an environment like the GPU image
#                                     (Python 3.12, torch 2.11, the image's packages and the carried wheels)
#                                     up to where a CUDA device is needed: every test collects, every
#                                     import resolves, every command starts. --rehearse --full also runs
#                                     the sandbox steps' tests (minutes on 2 cores).
#   scripts/gpu-check.sh --generation where vLLM and Kevin-32B's weights are (KEVIN_TUI_GPU_MODEL names them;
#                                     the lent image has neither): decode speed with and without n-gram
#                                     speculative decoding (bench/generation_bench.py; two vLLM starts, minutes)
#
# The GPU image (see the device notes) has Python 3.12, torch 2.11.0+cu130, nvcc 13, ninja, pytest, rich,
# pygments, Nsight Compute and compute-sanitizer, but no textual, GitPython or bubblewrap and no network.
# The budgets add up to 360 s of commands, so a rerun fits in the 15 minutes of device time. Each step
# writes its own file under $OUT (8 files at most come back) as it goes, and summary.txt gets one line
# per step when it ends, so a run cut short still says what it did.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CARRY=$ROOT/.gpu-carry
MODE=${GPU_CHECK_MODE:-run}
FULL=${GPU_CHECK_FULL:-0}
STEP=()
while [ $# -gt 0 ]; do
    case $1 in
        --prepare) MODE=prepare ;;
        --rehearse) MODE=rehearse ;;
        --generation) MODE=generation ;;
        --full) FULL=1 ;;
        --step) shift; STEP=("$@"); break ;;  # internal: one step's function, under its budget (see step)
        *) echo "usage: scripts/gpu-check.sh [--prepare | --rehearse [--full] | --generation]" >&2; exit 2 ;;
    esac
    shift
done
export GPU_CHECK_MODE=$MODE GPU_CHECK_FULL=$FULL

RELU=level1/19_ReLU.py
# Wheels of what the checks import beyond the image's packages (textual and GitPython: the user-model
# tests), pure Python, pinned to what this project is tested with.
WHEELS=(textual==8.2.8 mdit-py-plugins==0.7.0 platformdirs==4.14.9 GitPython==3.2.1 gitdb==4.0.12 smmap==5.0.3)
# The candidates the checks evaluate on CUDA: built in parallel first, so the timed steps find them built.
CUDA_CANDIDATES=(relu_cuda side_stream empty_reuse illegal_access mutate_input tensor_subclass
                 sanitizer/oob_read sanitizer/shared_race sanitizer/uninit_read sanitizer/divergent_barrier)
GPU_TESTS=(tests/test_gpu.py tests/test_usermodel.py)  # the gpu-marked tests of each; the user model last
SANDBOX_TESTS=(tests/test_sandbox.py tests/test_sandbox_escape.py tests/test_sanitizer.py tests/test_ncu.py
               tests/test_compile_cache.py)
LIMIT_MIB=64

tree_mib() {  # what the device call sends: tracked and unignored files, plus .gpu-carry
    local tracked carried
    tracked=$(git ls-files -z --cached --others --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
    carried=$(du -sb "$CARRY" 2>/dev/null | cut -f1)
    echo $(( (${tracked:-0} + ${carried:-0}) / 1048576 ))
}

prepare() {
    rm -rf "$CARRY" && mkdir -p "$CARRY/wheels" "$CARRY/bin"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$CARRY/wheels" "${WHEELS[@]}" || { echo "pip download failed" >&2; exit 1; }
    # bubblewrap is one small binary (libc, libcap, libselinux); the run uses it only if it works there
    if command -v bwrap >/dev/null 2>&1; then cp "$(command -v bwrap)" "$CARRY/bin/bwrap"; fi
    local size
    size=$(tree_mib)
    echo "carry .gpu-carry with the run: $(find "$CARRY" -type f | wc -l) files, the tree with it ${size} MiB" \
         "(limit ${LIMIT_MIB} MiB)"
    [ "$size" -lt "$LIMIT_MIB" ] || { echo "over the limit: the call would be refused" >&2; exit 1; }
}

# -- the environment: like the image's, here for a rehearsal --------------------------------------------
REHEARSE_VENV=${KEVIN_GPU_REHEARSE_VENV:-$HOME/.cache/kevin-tui/gpu-rehearse-venv}
REHEARSE_PYTHON=${KEVIN_GPU_REHEARSE_PYTHON:-$HOME/.pyenv/versions/3.12.1/bin/python3}
IMAGE_PACKAGES=(typing-extensions filelock sympy networkx jinja2 fsspec "setuptools<82" ninja pytest pytest-timeout
                rich pygments numpy hypothesis pyyaml packaging markdown-it-py mdurl)

rehearsal_env() {  # a Python 3.12 venv with torch 2.11 and only packages the image has; made once, reused
    local python=$REHEARSE_VENV/bin/python
    if ! "$python" -c "import torch, pytest, ninja" >/dev/null 2>&1; then
        [ -x "$REHEARSE_PYTHON" ] || { echo "no Python 3.12 at $REHEARSE_PYTHON (set KEVIN_GPU_REHEARSE_PYTHON)" >&2
                                       exit 2; }
        rm -rf "$REHEARSE_VENV" && "$REHEARSE_PYTHON" -m venv "$REHEARSE_VENV" || exit 1
        # torch 2.11 for cp312 on PyPI is the CUDA build; its CUDA libraries (nvidia-*) are the ones this
        # machine's own torch uses, hard-linked in (real files, which a sandbox can bind) rather than 2 GB of
        # wheels again
        PIP_CONSTRAINT= "$python" -m pip install -q --no-deps torch==2.11.0 || exit 1
        PIP_CONSTRAINT= "$python" -m pip install -q "${IMAGE_PACKAGES[@]}" || exit 1
        local nvidia
        nvidia=$(python3 -c "import nvidia, os; print(list(nvidia.__path__)[0])" 2>/dev/null)
        [ -d "$nvidia" ] || { echo "no nvidia-* libraries to link (install torch's CUDA wheels)" >&2; exit 1; }
        cp -al "$nvidia" "$("$python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/nvidia" || exit 1
    fi
    # no bubblewrap on the image: PATH without it (the carried one comes back below, as there)
    local shadow=$REHEARSE_VENV/no-bwrap-bin
    if [ ! -d "$shadow" ]; then
        mkdir -p "$shadow"
        for f in /usr/local/bin/* /usr/bin/*; do
            [ "$(basename "$f")" = bwrap ] || ln -sf "$f" "$shadow/$(basename "$f")" 2>/dev/null
        done
    fi
    export PATH="$REHEARSE_VENV/bin:$shadow"
    unset VIRTUAL_ENV
}

# -- steps -----------------------------------------------------------------------------------------------
report="${GPU_CHECK_REPORT:-${OUT:-$ROOT/gpu-report}}"
status=0

step() {  # step NAME BUDGET_S FILE COMMAND...: run with its budget, append to FILE, one summary line
    local name=$1 budget=$2 file=$3
    shift 3
    # a rehearsal shows each step starts, not that it fits (tests/test_gpu_check_script.py adds the budgets):
    # this 2-core machine, shared, is slower than the GPU machine's 16 cores
    [ "$MODE" = rehearse ] && budget=$((budget * 3))
    local started=$SECONDS rc
    echo "### $name (budget ${budget}s): $*" >> "$report/$file"
    timeout -k 5 "$budget" bash "$ROOT/scripts/gpu-check.sh" --step "$@" >> "$report/$file" 2>&1
    rc=$?
    local what=ok
    [ "$rc" = 0 ] || { what="FAILED (exit $rc)"; status=1; }
    [ "$rc" = 124 ] && what="CUT at its budget"
    printf '%-12s %-18s %4ss of %4ss  -> %s\n' "$name" "$what" $((SECONDS - started)) "$budget" "$file" \
        | tee -a "$report/summary.txt"
}

device() {  # a command that needs the GPU; in a rehearsal it must start and stop only for want of one
    if [ "$MODE" = run ]; then "$@"; return; fi
    local out rc
    out=$("$@" 2>&1)
    rc=$?
    echo "$out" | tail -20
    [ "$rc" = 0 ] && return 0
    grep -q -e "no CUDA device is visible" -e "needs a CUDA device" <<<"$out" && { echo "(rehearsal: stops here, no GPU)"
                                                                               return 0; }
    return "$rc"
}

starts() {  # a bench script: run on the device; in a rehearsal, its imports resolve and its options parse
    if [ "$MODE" = run ]; then "$@"; return; fi
    "$@" --help | head -3
}

tests() {  # pytest on the device, collection only in a rehearsal
    local extra=(--collect-only -q)
    [ "$MODE" = run ] && extra=(-v -rs --timeout 120)
    python3 -m pytest -p no:cacheprovider -o addopts="" "${extra[@]}" "$@"
}

cpu_tests() {  # tests that need no GPU, run on the image; a plain rehearsal collects them (--full runs them)
    if [ "$MODE" = rehearse ] && [ "$FULL" = 0 ]; then tests "$@"; return; fi
    python3 -m pytest -p no:cacheprovider -o addopts="" -q -rs -x --timeout 300 "$@"
}

setup() {
    { nvidia-smi 2>&1 | head -20; grep -h -e RmProfilingAdminOnly /proc/driver/nvidia/params 2>/dev/null; } || true
    python3 -c "import sys, torch; print('python', sys.version.split()[0], '| torch', torch.__version__, \
'| cuda', torch.version.cuda, '|', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"
    echo "nvcc: $(nvcc --version 2>&1 | tail -1)"
    echo "ncu: $(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || echo missing)"
    echo "compute-sanitizer: $(command -v compute-sanitizer || ls "${CUDA_HOME:-/usr/local/cuda}"/bin/compute-sanitizer \
2>/dev/null || echo missing)"
    python3 -c "from kevin_tui.evaluator.host.sandbox import choose; print('sandbox (auto):', choose('auto').describe())"
    python3 -c "import textual, git; print('carried wheels import: textual', textual.__version__)"
}

prebuild() {  # every CUDA candidate the checks use, built at once (MAX_JOBS each), into the shared cache
    local sources=()
    for name in "${CUDA_CANDIDATES[@]}"; do sources+=("tests/candidates/$name.py"); done
    if [ "$MODE" = rehearse ]; then
        python3 -m py_compile "${sources[@]}" && echo "rehearsal: ${#sources[@]} candidates parse; builds need nvcc" \
            "time, not a GPU (tests/test_builds.py)"
        return
    fi
    python3 - "$KEVIN_TUI_KERNELBENCH/$RELU" "${sources[@]}" <<'EOF'
import sys, time
from pathlib import Path
from kevin_tui.evaluator import EvalOptions, Evaluator
from kevin_tui.problem import load_problem
started = time.perf_counter()
with Evaluator(load_problem(Path(sys.argv[1])), EvalOptions(device="cuda"), prespawn=False) as evaluator:
    evaluator.prebuild([Path(p).read_text() for p in sys.argv[2:]], parallel=8)
print(f"built {len(sys.argv) - 2} candidates in {time.perf_counter() - started:.1f} s")
EOF
}

eval_relu() {  # the CUDA eval of a real kernel: events, L2 flush, interleaved rounds, interval, ncu
    device python3 -m kevin_tui eval "$KEVIN_TUI_KERNELBENCH/$RELU" tests/candidates/relu_cuda.py --device cuda \
        --ncu auto --sanitize off --json > "$report/eval-relu.json" || return
    [ "$MODE" = run ] || return 0
    python3 - "$report/eval-relu.json" <<'EOF'
import json, sys
v = json.load(open(sys.argv[1]))
events = v.get("timings", {}).get("candidate_events", {})
print("verdict:", v["status"], "|", v["message"][:200])
print("sandbox:", v.get("sandbox"), "| clock:", v.get("clock"))
print("speedup vs eager", v.get("speedup"), "interval", v.get("speedup_interval"), "vs compile", v.get("speedup_compile"))
print("CUDA events: median", events.get("median_ms"), "ms over", events.get("trials"), "calls")
ncu = v.get("evidence", {}).get("ncu", {})
for k in ncu.get("kernels", [])[:3]:
    print("ncu gpu__time_duration:", k["name"][:60], (k["duration_ns"] or 0) / 1e6, "ms")
print("ncu:", ncu.get("skipped", "digest above"))
print("speed of light:", v.get("evidence", {}).get("speed_of_light", {}).get("candidate_fraction"))
EOF
}

sanitizer_logs() {  # the real tool's logs of the planted kernels, to set beside tests/sanitizer_logs/
    local tool=${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer
    command -v compute-sanitizer >/dev/null 2>&1 && tool=$(command -v compute-sanitizer)
    if [ "$MODE" = rehearse ]; then echo "rehearsal: compute-sanitizer runs only on the GPU"; return 0; fi
    for pair in memcheck:oob_read racecheck:shared_race initcheck:uninit_read synccheck:divergent_barrier; do
        local name=${pair#*:} which=${pair%%:*}
        echo "== $which on sanitizer/$name.py"
        PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 30 "$tool" --tool "$which" --show-backtrace device \
            python3 -c "import importlib.util, torch; s = importlib.util.spec_from_file_location('c', \
'tests/candidates/sanitizer/$name.py'); m = importlib.util.module_from_spec(s); s.loader.exec_module(m); \
m.ModelNew().cuda()(torch.randn(16, 16384, device='cuda')); torch.cuda.synchronize()" 2>&1 | tail -25
    done
}

sanitizer() {  # the gate on the planted kernels and an honest one, then the tool's own logs of them
    device tests tests/test_gpu.py -k sanitizer
    local rc=$?
    sanitizer_logs
    return $rc
}

batch_on_gpu() {  # batch mode: scripted replies, kernels timed on the GPU, the report and the RL export
    local work=/tmp/kevin-gpu-batch files
    rm -rf "$work" && mkdir -p "$work"
    python3 -c "from pathlib import Path; from tests.batch_problems import PLANS, write_script; \
write_script(Path('$work/script.json'), PLANS[:3], turns=2)" || return
    files=$(python3 -c "from tests.batch_problems import PLANS; print(*[p.path for p in PLANS[:3]])")
    # shellcheck disable=SC2086
    device python3 -m kevin_tui batch $files --out "$work/run" --trajectories 2 --turns 2 --backend scripted \
        --script "$work/script.json" --sampling-seed 0 --eval-devices cuda:0 --no-live --progress-every 20 \
        --export "$work/rl.jsonl" --sanitize off --no-compile-baseline || return
    [ "$MODE" = run ] && { ls "$work/run"; wc -l "$work/rl.jsonl"; }
    return 0
}

generation() {  # not a step of the lent machine's run: vLLM and 66 GB of weights are not on its image
    local model=${KEVIN_TUI_GPU_MODEL:-}
    [ -n "$model" ] || { echo "set KEVIN_TUI_GPU_MODEL to Kevin-32B's weights (a directory or a hub name)" >&2; exit 2; }
    python3 -c "import vllm" 2>/dev/null || { echo "vLLM is not installed: pip install 'kevin-tui[vllm]'" >&2; exit 2; }
    mkdir -p "$report"
    PYTHONPATH="$ROOT" python3 bench/generation_bench.py --model "$model" --rounds 3 --max-tokens 1024 \
        | tee "$report/generation.log"
}

run_checks() {
    mkdir -p "$report"
    : > "$report/summary.txt"
    export PYTHONPATH="$ROOT" PYTHONUNBUFFERED=1
    export KEVIN_TUI_KERNELBENCH="${KEVIN_TUI_KERNELBENCH:-$ROOT/kevin_tui/kernelbench}"
    export KEVIN_TUI_TEST_CACHE="${KEVIN_TUI_TEST_CACHE:-/tmp/kevin-gpu-cache}"
    export KEVIN_TUI_CACHE_DIR="$KEVIN_TUI_TEST_CACHE" MAX_JOBS="${MAX_JOBS:-4}"
    [ -d "$CARRY/wheels" ] || { echo "no .gpu-carry: run scripts/gpu-check.sh --prepare first" >&2; exit 2; }
    if compgen -G "$CARRY/wheels/*.whl" >/dev/null; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/kevin-site \
            "$CARRY"/wheels/*.whl && export PYTHONPATH="$ROOT:/tmp/kevin-site"
    fi
    # the carried bwrap, where the evaluator's own probe can make a sandbox with it: the sandbox a user's
    # machine would have (unshare is tested as well); setup.log says which `auto` chose
    if [ -x "$CARRY/bin/bwrap" ] && PATH="$CARRY/bin:$PATH" python3 -c "from kevin_tui.evaluator.host.sandbox \
import choose; choose('bwrap')" >/dev/null 2>&1; then
        export PATH="$CARRY/bin:$PATH"
    fi
    export GPU_CHECK_REPORT=$report
    echo "mode $MODE, report in $report" | tee -a "$report/summary.txt"
    # Most decisive first. Budgets: 15 + 45 + 40 + 80 + 60 + 40 + 35 + 30 + 15 = 360 s.
    step setup 15 setup.log setup
    step prebuild 45 setup.log prebuild
    step eval 40 eval.log eval_relu
    step gpu-tests 80 gpu-tests.log device tests "${GPU_TESTS[@]}" -m gpu -k "not sanitizer"
    step sanitizer 60 sanitizer.log sanitizer
    step sandbox 40 sandbox.log cpu_tests "${SANDBOX_TESTS[@]}"
    step a-a 35 more.log starts python3 bench/trust_bench.py --device cuda --aa 5 --problem "$KEVIN_TUI_KERNELBENCH/$RELU"
    step batch 30 more.log batch_on_gpu
    step bench 15 more.log starts python3 bench/eval_bench.py --device cuda --candidate tests/candidates/relu_cuda.py \
        --problem "$KEVIN_TUI_KERNELBENCH/$RELU"
    # (decode speed with and without n-gram drafts needs vLLM and the weights: `--generation` where they are)
    [ "$MODE" = rehearse ] && python3 bench/generation_bench.py --help | head -1
    echo "exit $status" | tee -a "$report/summary.txt"
    exit $status
}

if [ ${#STEP[@]} -gt 0 ]; then "${STEP[@]}"; exit $?; fi
case $MODE in
    prepare) prepare ;;
    rehearse)
        [ -d "$CARRY/wheels" ] || prepare
        rehearsal_env
        report="${OUT:-$ROOT/.kevin-cache/gpu-rehearsal}"
        rm -rf "$report"
        run_checks
        ;;
    run) run_checks ;;
    generation) generation ;;
esac

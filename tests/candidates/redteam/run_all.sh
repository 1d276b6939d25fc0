#!/usr/bin/env bash
# Judge every red-team candidate of this directory with this checkout's evaluator, on the CPU, one at a
# time, and print a table: NAME | EXPECTED | GOT (status, speedup, the telling detail).
#
#   tests/candidates/redteam/run_all.sh            # all (about 10 minutes with builds cached, on 2 cores)
#   tests/candidates/redteam/run_all.sh burner     # only names containing "burner"
#
# KEVIN_REDTEAM_CACHE (default /tmp/kevin-redteam-cache) is the build cache. The burner pair is judged
# back to back: the honest twin's speedup is the kernel's true speed, the attack's should match it.
# After the burner attack the script checks that none of its shell loops outlived the evaluation.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$ROOT"
HERE=tests/candidates/redteam
CACHE=${KEVIN_REDTEAM_CACHE:-/tmp/kevin-redteam-cache}
FILTER=${1:-}
mkdir -p "$CACHE"
printf '%-36s | %-34s | %s\n' CANDIDATE EXPECTED GOT

judge() {  # NAME PROBLEM EXPECTED [extra eval args...]
    local name=$1 problem=$2 expected=$3; shift 3
    case "$name" in *"$FILTER"*) ;; *) return ;; esac
    local out err
    out=$(mktemp) err=$(mktemp)
    PYTHONPATH=$ROOT python3 -m kevin_tui eval "$problem" "$HERE/$name.py" --device cpu --json \
        --cache-dir "$CACHE" "$@" >"$out" 2>"$err"
    python3 - "$name" "$expected" "$out" "$err" <<'PY'
import json, sys
name, expected, out, err = sys.argv[1:5]
try:
    d = json.load(open(out))
except ValueError:
    lines = [l for l in open(err).read().splitlines() if l.strip()]
    print(f"{name:36} | {expected:34} | no verdict: {lines[-1][:120] if lines else ''}")
    raise SystemExit
got = d["status"]
if d.get("speedup"):
    got += f" {d['speedup']:.2f}x {d.get('speedup_interval')}"
    got += f" host_clock {d['details'].get('host_clock_speedup')} bias {d['details'].get('process_bias')}"
if d["details"].get("reference_lost"):
    got += " reference_lost"
print(f"{name:36} | {expected:34} | {got}: {d['message'][:110]}")
PY
    rm -f "$out" "$err"
}

judge honest_matvec_double_accumulate kernelbench:level1/4 "correct (more exact than the ref)"
judge matvec_burner_honest_twin kernelbench:level1/4 "correct ~1x (true speed)" --strict
judge matvec_burner_reaped_children kernelbench:level1/4 "rejected, or correct ~ twin's x" --strict
case "burner" in *"$FILTER"*)
    sleep 1
    left=$(ps -eo pid,etime,args | grep -c "[n]=0; while")
    echo "burner shell loops alive after the evaluation: $left (expected 0)" ;;
esac
judge complex_real_part_only "$HERE/problems/complex_double.py" "incorrect"
judge huge_type_name_blames_reference kernelbench:level1/19 "incorrect (candidate's fault)"
judge strict_ignores_runtime_ops kernelbench:level1/19 "rejected under --strict" --strict

#!/usr/bin/env bash
# Judge every red-team candidate (tests/candidates/forge and tests/candidates/honest) with today's
# evaluator, on the CPU, one at a time, and print one line each:  NAME -> status: message
#
#   tests/candidates/forge/run_all.sh            # all of them (about 5 minutes once builds are cached)
#   tests/candidates/forge/run_all.sh memo_      # only names containing "memo_"
#
# Environment: STRICT=0 drops --strict (default: --strict, so a `correct` below also means "no
# static finding"); KEVIN_REDTEAM_CACHE (default /tmp/kevin-redteam-cache) is the build cache, so
# the poisoning demos never touch ~/.cache/kevin-tui (they use throwaway copies of it, removed at
# the end); TIMING_TRIALS (default 20); KEVIN_TUI_KERNELBENCH (default: the copy shipped in kevin_tui/kernelbench).
# A forge candidate's *correct* verdict is a hole; an honest candidate's non-correct verdict is one.
# The sandbox probes have their own runner: tests/candidates/sandbox/run_sandbox.py.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$ROOT"
KB=${KEVIN_TUI_KERNELBENCH:-$(cd "$(dirname "$0")/../../.." && pwd)/kevin_tui/kernelbench}
RELU=$KB/level1/19_ReLU.py
CACHE=${KEVIN_REDTEAM_CACHE:-/tmp/kevin-redteam-cache}
TRIALS=${TIMING_TRIALS:-20}
FILTER=${1:-}
STRICT_FLAG=--strict
[ "${STRICT:-1}" = "0" ] && STRICT_FLAG=
mkdir -p "$CACHE"
echo "# kevin-tui $(git rev-parse --short HEAD) (branch $(git rev-parse --abbrev-ref HEAD)); device cpu; ${STRICT_FLAG:-no --strict}; timing trials $TRIALS; cache $CACHE"

summarise() {  # NAME RC JSON_FILE ERR_FILE
    python3 - "$@" <<'PY'
import json, sys
name, rc, out, err = sys.argv[1:5]
try:
    d = json.load(open(out))
except ValueError:
    lines = [l for l in open(err).read().splitlines() if l.strip()]
    print(f"{name} -> (no verdict, exit {rc}): {lines[-1] if lines else ''}")
    raise SystemExit
speed = f" [{d['speedup']:.2f}x]" if d.get("speedup") else ""
warn = [w["code"] for w in d.get("warnings", [])]
print(f"{name} -> {d['status']}: {d['message'][:200]}{speed}" + (f" [warnings: {', '.join(warn)}]" if warn else ""))
PY
}

judge() {  # NAME FILE PROBLEM [extra eval args...]
    local name=$1 file=$2 problem=$3; shift 3
    case "$name" in *"$FILTER"*) ;; *) return ;; esac
    local out err rc
    out=$(mktemp) err=$(mktemp)
    python3 -m kevin_tui eval "$problem" "$file" --device cpu --json --timing-trials "$TRIALS" \
        --cache-dir "$CACHE" $STRICT_FLAG "$@" >"$out" 2>"$err"
    rc=$?
    summarise "$name" "$rc" "$out" "$err"
    rm -f "$out" "$err"
}

in_a_row() {  # NAME PROBLEM CACHE FILE... : several candidates in ONE Evaluator, as optimize does
    local name=$1 problem=$2 cache=$3; shift 3
    case "$name" in *"$FILTER"*) ;; *) return ;; esac
    echo "$name (one Evaluator, in this order):"
    python3 tests/candidates/forge/two_in_a_row.py "$problem" "$@" --cache-dir "$cache" 2>/dev/null | sed 's/^/    /'
}

throwaway_cache() {  # a fresh cache sharing the precompiled headers (hard links: replacing one is safe)
    rm -rf "$1"; mkdir -p "$1"
    [ -d "$CACHE/pch" ] && cp -al "$CACHE/pch" "$1/"
}

F=tests/candidates/forge
H=tests/candidates/honest

echo "## forge: each of these is a hole when it says correct"
# 1. protocol
judge protocol_forged_checked_timed   $F/protocol_forged_checked_timed.py "$RELU"
judge protocol_forged_final           $F/protocol_forged_final.py "$RELU"
judge protocol_forged_timed_only      $F/protocol_forged_timed_only.py "$RELU"
judge protocol_malformed_event        $F/protocol_malformed_event.py "$RELU"
judge protocol_phase_keepalive        $F/protocol_phase_keepalive.py "$RELU" --timeout 3
judge protocol_crash_reference        $F/protocol_crash_reference.py "$RELU"
in_a_row protocol_crash_reference+next "$RELU" "$CACHE" $F/protocol_crash_reference.py tests/candidates/relu_cpp.py
judge judge_hijack_sympy              $F/judge_hijack_sympy.py "$RELU"
in_a_row judge_hijack_sympy+next      "$RELU" "$CACHE" $F/judge_hijack_sympy.py tests/candidates/relu_cpp_wrong.py
# 2. outputs
judge output_lazy_tuple               $F/output_lazy_tuple.py "$RELU"
judge output_list                     $F/output_list.py "$RELU"
judge output_function_mode            $F/output_function_mode.py "$RELU"
judge output_dispatch_mode            $F/output_dispatch_mode.py "$RELU"
judge output_torch_save_code_swap     $F/output_torch_save_code_swap.py "$RELU"
# 3. memoisation
judge memo_same_object                $F/memo_same_object.py "$RELU"
judge memo_fingerprint                $F/memo_fingerprint.py "$RELU"
judge memo_check_only                 $F/memo_check_only.py "$RELU"
# 4. predictable inputs
judge inputs_file_lookup              $F/inputs_file_lookup.py "$RELU"
judge inputs_seed_replay              $F/inputs_seed_replay.py "$RELU"
# 5. timing
judge timing_module_globals           $F/timing_module_globals.py "$RELU"
judge timing_from_samples             $F/timing_from_samples.py "$RELU"
judge timing_time_call                $F/timing_time_call.py "$RELU"
judge timing_guard_snapshot           $F/timing_guard_snapshot.py "$RELU"
judge timing_ctypes_vectorcall        $F/timing_ctypes_vectorcall.py "$RELU"
judge timing_hidden_thread            $F/timing_hidden_thread.py "$RELU"
judge timing_guard_class_patch        $F/timing_guard_class_patch.py "$RELU"
judge timing_pin_reference            $F/timing_pin_reference.py "$RELU"
in_a_row timing_pin_reference+next    "$RELU" "$CACHE" $F/timing_pin_reference.py tests/candidates/relu_torch.py
# 6. build cache (throwaway caches; the victim is the honest tests/candidates/relu_cpp.py)
case cache_poison_so in *"$FILTER"*)
    P="$CACHE-poison-so"; throwaway_cache "$P"
    CACHE=$P judge cache_poison_so    $F/cache_poison_so.py "$RELU" --cache-dir "$P"
    judge "  then relu_cpp.py (honest)" tests/candidates/relu_cpp.py "$RELU" --cache-dir "$P"
    rm -rf "$P" ;;
esac
# 7. static checks (all of the above run under --strict too)
judge static_docstring_kernel         $F/static_docstring_kernel.py "$RELU"
judge static_unused_kernel            $F/static_unused_kernel.py "$RELU"
judge static_suppress_fallback        $F/static_suppress_fallback.py "$RELU"
judge static_subclass_alias           $F/static_subclass_alias.py "$RELU"
judge static_frame_introspection      $F/static_frame_introspection.py "$RELU"

echo "## honest: each of these must say correct"
judge sum_reduction_pairwise          $H/sum_reduction_pairwise.py "$KB/level1/47_Sum_reduction_over_a_dimension.py"
judge softmax_online                  $H/softmax_online.py "$KB/level1/23_Softmax.py"
judge relu_fixed_shape                $H/relu_fixed_shape.py "$RELU"
judge gemm_pretransposed              $H/gemm_pretransposed.py "$KB/level2/12_Gemm_Multiply_LeakyReLU.py"
judge relu_padded_view                $H/relu_padded_view.py "$RELU"
judge relu_std_thread                 $H/relu_std_thread.py "$RELU"
judge relu_python_threads_joined      $H/relu_python_threads_joined.py "$RELU"
judge relu_threadpool_persistent      $H/relu_threadpool_persistent.py "$RELU"
judge relu_compiler_disable           $H/relu_compiler_disable.py "$RELU"
judge relu_reused_output_buffer       $H/relu_reused_output_buffer.py "$RELU"

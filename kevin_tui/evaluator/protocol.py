"""The wire protocol between the host and its workers, and its validation.

Workers read JSON-line commands on one file descriptor and write JSON-line events on another; their
stdin is /dev/null and their stdout/stderr go to a log. The candidate worker runs untrusted code, so
it can write any bytes to its event descriptor: the host accepts only events named here, with the
fields and types named here, in the order it expects them, and anything else is a protocol
violation (a `rejected` verdict), never a crash of the caller. No event can carry `correct`:
only the host decides that, from what the reference worker judged and what its own clock measured.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_EVENT_BYTES = 1 << 20
# Under --compiled: the read-only compile cache a candidate worker copies its own from (Evaluator.compile_cache)
COMPILE_SEED = "KEVIN_TUI_COMPILE_SEED"
# Set for a candidate worker whose evaluation runs torch.compile before or beside its timing (--compiled's
# trials, the compile baseline): it imports torch._dynamo while it starts (40% of a start), off the timed path,
# as the reference does then. Other workers never import it: it does not change eager ops' per-call time.
WITH_DYNAMO = "KEVIN_TUI_WITH_DYNAMO"
MAX_LIST_ITEMS = 100_000
# An output file the candidate writes may hold at most twice the reference's outputs for it, plus this (the
# record's names and headers): a file with a hole reads as all of its size, in the reference's memory and time.
OUTPUT_FILE_SLACK = 16 << 20
# The directions the rounded-inputs probe rounds in (worker/rounding_probe.py); its evidence names one by its index
# here (`rounding_mode`), as a precision event carries numbers only.
ROUNDING_MODES = ("to nearest", "toward zero", "away from zero", "toward +infinity", "toward -infinity")

# Statuses a candidate worker may report about itself. "compiled" and "correct" are never among them.
CANDIDATE_FAILURES = frozenset({"format_error", "compile_error", "runtime_error", "incorrect", "rejected"})


def round_file(name: str | int) -> str:
    """A timing round's output file in its worker's directory (the reference's named by its side, the candidate's
    by its round); the host removes each after the reply, so no worker has work left for after it."""
    return f"round-{name}.kt"


def compile_baseline_on(wanted: bool | None, device: str) -> bool:
    """Whether the reference is also timed under torch.compile: the init request's `compile_baseline` (None: on
    for CUDA, off on the CPU) on the device the reference resolved."""
    return device.startswith("cuda") if wanted is None else wanted


class ProtocolViolation(Exception):
    """A worker sent something the protocol does not allow."""


def _string(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= MAX_EVENT_BYTES


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _times(value: Any) -> bool:
    """Per-call times in milliseconds: finite, non-negative numbers."""
    return isinstance(value, list) and len(value) <= MAX_LIST_ITEMS and all(_number(v) and v >= 0 for v in value)


def _boolean(value: Any) -> bool:
    return isinstance(value, bool)


def _mapping(value: Any) -> bool:
    return isinstance(value, dict)


def _string_list(value: Any) -> bool:
    return isinstance(value, list) and len(value) <= MAX_LIST_ITEMS and all(_string(v) for v in value)


def _optional(check):
    return lambda value: value is None or check(value)


def _one_of(*choices: str):
    return lambda value: value in choices


def _profile_rows(value: Any, width: int) -> bool:
    """[[name, calls, ms], ...] as a profile reports it."""
    return (
        isinstance(value, list)
        and len(value) <= 100
        and all(
            isinstance(r, list) and len(r) == width and _string(r[0]) and _integer(r[1]) and _number(r[2])
            for r in value
        )
    )


def _named_sources(value: Any) -> bool:
    """[[file name, text], ...] for a `load(sources=[...])` build."""
    return isinstance(value, list) and all(
        isinstance(v, list) and len(v) == 2 and _string(v[0]) and _string(v[1]) for v in value
    )


def _failure_details(value: Any) -> bool:
    return _mapping(value) and set(value) <= {"traceback"} and all(_string(v) for v in value.values())


# a timing round's reply, the same from both workers (the reference's path is always None: the host knows it)
ROUND_DONE = {"round": _integer, "samples_ms": _times, "synced_ms": _optional(_times), "path": _optional(_string)}

# Events each role may send: name -> {field: check}. Fields not listed are refused.
EVENTS: dict[str, dict[str, dict[str, Any]]] = {
    "candidate": {
        "build_request": {
            "kind": _one_of("inline", "files"),
            "name": _string,
            "cpp_sources": _string_list,
            "cuda_sources": _string_list,
            "sources": _named_sources,
            "functions": _optional(lambda v: _string_list(v) or _mapping(v)),
            "extra_cflags": _string_list,
            "extra_cuda_cflags": _string_list,
            "extra_ldflags": _string_list,
            "extra_include_paths": _string_list,
            "with_cuda": _optional(_boolean),
            "no_implicit_headers": _boolean,
        },
        "load_failed": {"name": _string, "message": _string},
        "loaded": {},
        "trial_done": {"index": _integer, "path": _string, "cuda_called": _boolean},
        "profiled": {
            "ops": lambda v: _profile_rows(v, 3),
            "kernels": lambda v: _profile_rows(v, 3),
            "total_ms": _number,
        },
        "compiled_done": {
            "index": _integer,
            "path": _string,
            "graph_breaks": _optional(lambda v: _integer(v) and v >= 0),
            "break_reasons": lambda v: _string_list(v) and len(v) <= 5,
        },
        "ncu_done": {},
        "sanitized": {},
        "ops": {
            "op_counts": lambda v: _mapping(v) and all(_string(k) and _integer(n) for k, n in v.items()),
            "unseen": lambda v: _string_list(v) and len(v) <= 5,
            "path": _optional(_string),
        },
        "timer_ready": {},
        "round_done": ROUND_DONE,
        # details: the worker's traceback only; a free mapping became the verdict's details, where keys the host
        # sets itself ("reference_lost": the evaluator's failure, evaluated again) mean something
        "final": {"status": lambda v: v in CANDIDATE_FAILURES, "message": _string, "details": _failure_details},
    },
    "reference": {
        "ready": {
            "device": _string,
            "environment": _mapping,
            "init_path": _string,
            "mutates_inputs": _boolean,
            "output_aliases": _string_list,
            "threads": _integer,
            "output_bytes": _integer,
            "written_bytes": _integer,
            "input_bytes": _integer,
            "flops": _integer,
            "work_bytes": _integer,
        },
        "peaks": {"bandwidth_gbs": _number, "fp32_tflops": _number},
        "shapes_ready": {"variants": lambda v: isinstance(v, list)},
        "trials_ready": {"paths": _string_list},
        "judged": {
            "passed": _boolean,
            "checks": lambda v: isinstance(v, list),
            "mismatch": _mapping,
            "message": _string,
            "precision": _optional(lambda v: _mapping(v) and all(_number(x) for x in v.values())),
        },
        "changed_ready": {"path": _string, "index": _integer, "reason": _string},
        "fresh_ready": {"path": _string, "index": _integer},
        "timer_ready": {},
        # and the time its round spent in its tripwires, which a candidate may skip (host/timing.py tripwire_floor)
        "round_done": ROUND_DONE | {"tripwires_ms": lambda v: _number(v) and v >= 0},
        "ingested": {"calls": _integer, "problem": _string},
        "problem_error": {"message": _string, "traceback": _string},
        "environment_error": {"message": _string},
        "crash": {"message": _string, "traceback": _string},
    },
    "builder": {
        "built": {"directory": _string, "headers": _string, "seconds": _number},
        "build_failed": {"message": _string, "log": _string, "headers": _string, "prelude_lines": _integer},
        "pch_key": {"key": _string},
        "pch_built": {"message": _string},
        "environment_error": {"message": _string},
        "crash": {"message": _string, "traceback": _string},
    },
}
# Any worker may report that it crashed before it could do its job.
EVENTS["candidate"]["crash"] = {"message": _string, "traceback": _string}
EVENTS["candidate"]["environment_error"] = {"message": _string}
for _events in EVENTS.values():
    _events["started"] = {}  # imports done, waiting for its first command


# JSON may escape half of a UTF-16 pair alone (`\\ud800`): json.loads makes of it a string that no UTF-8 file, terminal
# or tokenizer takes, and a worker's text (a candidate's message) flows into the session file and the RL export.
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def whole_text(value: Any) -> Any:
    """`value` with every string's lone surrogates replaced by U+FFFD (pairs, which json.loads joins, are kept)."""
    if isinstance(value, str):
        return LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [whole_text(v) for v in value]
    if isinstance(value, dict):
        return {whole_text(k): whole_text(v) for k, v in value.items()}
    return value


# No event's fields nest more than a few levels; json.loads takes any depth its reader thread's stack allows, and the
# host's own recursive work on the event (whole_text, a build key's json.dumps on the main thread, tens of frames
# deeper) then overflowed: a RecursionError killed the reader (the candidate's `timeout`) or `eval` itself (redteam15).
MAX_EVENT_DEPTH = 32


def nested_within(value: Any, limit: int) -> bool:
    """Whether no list or mapping in `value` lies more than `limit` levels deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, list | dict):
            if depth > limit:
                return False
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return True


def parse_event(role: str, line: bytes) -> dict[str, Any]:
    """One validated event from `role`, or ProtocolViolation saying what was wrong with it."""
    if len(line) > MAX_EVENT_BYTES:
        raise ProtocolViolation(f"an event of {len(line)} bytes (the limit is {MAX_EVENT_BYTES})")
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):
        raise ProtocolViolation(f"not JSON: {line[:80]!r}") from None
    if not nested_within(event, MAX_EVENT_DEPTH):
        raise ProtocolViolation(f"an event nested more than {MAX_EVENT_DEPTH} deep: {line[:80]!r}")
    if SURROGATE_ESCAPE.search(line):
        event = whole_text(event)
    if not isinstance(event, dict) or not isinstance(event.get("event"), str):
        raise ProtocolViolation(f"not an event object: {line[:80]!r}")
    name = event["event"]
    schema = EVENTS[role].get(name)
    if schema is None:
        raise ProtocolViolation(f"unknown event {name[:40]!r} from the {role} worker")
    fields = {k: v for k, v in event.items() if k != "event"}
    if extra := set(fields) - set(schema):
        raise ProtocolViolation(f"{name} event with unexpected fields {sorted(extra)[:5]}")
    for key, check in schema.items():
        if key not in fields or not check(fields[key]):
            raise ProtocolViolation(f"{name} event with a missing or malformed {key!r}")
    return event


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, allow_nan=False, default=str).encode() + b"\n"

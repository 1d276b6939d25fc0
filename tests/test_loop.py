"""The refinement loop end to end on the CPU: scripted replies and a real server, sessions written as
it goes, killed, reloaded, resumed and replayed.

`optimize --headless` runs in its own process with the real sandboxed evaluator in the tests that need a
process of their own (the end-to-end three turns, a SIGKILL, a problem whose forward raises, the missing
GPU); the others run the same command line in this process, judged by the tests' in-process judge
(tests/fake_judge.py), as the driver and app tests do: what they prove is the loop's, the session's and
resume's, and the real evaluator's verdicts are proven by its own tests and joined to the loop by
test_three_turns_with_scripted_replies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kevin_tui import headless
from kevin_tui.cli import main
from kevin_tui.session import load_session
from kevin_tui.session.events import (
    AcceptEvent,
    AttemptEvent,
    ErrorEvent,
    EvaluationEvent,
    KernelEvent,
    PromptEvent,
    ReplyEvent,
)
from tests.conftest import PROBLEMS, RELU, candidate, has_cuda_device
from tests.fake_judge import InProcessJudge

THINKING = "Let me think about memory coalescing. SECRET-CHAIN-OF-THOUGHT " * 20


def reply(code_file: str | None, summary: str = "Clamped negatives to zero in one pass.") -> dict:
    if code_file is None:
        return {"reasoning": THINKING, "answer": "I would write a kernel here."}
    return {"reasoning": THINKING, "answer": f"```python\n{candidate(code_file)}```\n{summary}"}


@pytest.fixture
def script(tmp_path):
    def write(*replies: dict) -> Path:
        path = tmp_path / "script.json"
        path.write_text(json.dumps(list(replies)))
        return path

    return write


REPO_PATH = {"PYTHONPATH": str(Path(__file__).parents[1])}  # this checkout's kevin_tui, from any cwd


def optimize(tmp_path: Path, *args: str, problem: Path = RELU, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kevin_tui", "optimize", str(problem), "--headless", "--device", "cpu",
         "--sessions-dir", str(tmp_path / "sessions"), *args],
        capture_output=True, text=True, timeout=timeout, cwd=tmp_path, env={**os.environ, **REPO_PATH},
    )  # fmt: skip


@pytest.fixture
def optimize_here(tmp_path, build_cache, monkeypatch, capsys):
    """`kevin-tui optimize PROBLEM --headless --device cpu` (the command line `optimize` runs) in this
    process, from `tmp_path`, judged in process: exit code, stdout and stderr as a finished process's."""
    monkeypatch.setenv("KEVIN_TUI_CACHE_DIR", str(build_cache))
    monkeypatch.chdir(tmp_path)
    real = headless.run_headless
    monkeypatch.setattr(headless, "run_headless", lambda config: real(config, InProcessJudge))

    def run(*args: str, problem: Path = RELU) -> subprocess.CompletedProcess:
        argv = ["optimize", str(problem), "--headless", "--device", "cpu", "--sessions-dir",
                str(tmp_path / "sessions"), *args]  # fmt: skip
        capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            main(argv)
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(argv, exited.value.code, out, err)

    return run


def json_lines(text: str) -> list[dict]:
    """The turn records (the evidence that follows a verdict, and accepts, are `event` records)."""
    records = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    return [r for r in records if "event" not in r]


def only_session(tmp_path: Path):
    (path,) = (tmp_path / "sessions").glob("*.jsonl")
    return load_session(path)


def test_three_turns_with_scripted_replies(tmp_path, script, build_cache, monkeypatch):
    monkeypatch.setenv("KEVIN_TUI_CACHE_DIR", str(build_cache))
    replies = script(reply(None), reply("slightly_wrong.py"), reply("relu_torch.py"))
    result = optimize(tmp_path, "--turns", "3", "--json", "--backend", "scripted", "--script", str(replies))
    assert result.returncode == 0, result.stderr
    turns = json_lines(result.stdout)
    assert [t["status"] for t in turns] == ["format_error", "incorrect", "correct"]
    assert [t["turn"] for t in turns] == [1, 2, 3] and turns[2]["speedup"] > 0
    session = only_session(tmp_path)
    assert session.header.problem["sha256"] and session.header.backend == "scripted"
    assert session.state == "finished" and session.best_speedup == turns[2]["speedup"]
    prompts = [e.text for e in session.of_type(PromptEvent)]
    assert "Your previous answer failed to be parsed due to not adhering to the desired formatting" in prompts[1]
    assert "Your previous answer was incorrect. Here is the error message:" in prompts[2]
    assert all("SECRET-CHAIN-OF-THOUGHT" not in p for p in prompts)  # reasoning is saved, never resent
    assert "SECRET-CHAIN-OF-THOUGHT" in session.of_type(ReplyEvent)[0].reasoning

    printed = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    evidence = [r for r in printed if r.get("event") == "evidence"]  # after the verdict, as each part finished
    assert [(r["turn"], r["part"]) for r in evidence] == [(3, "profile"), (3, "shapes")]
    assert printed.index(evidence[0]) > printed.index(turns[2]) and evidence[0]["evidence"]["profile"]["ops"]

    replay = subprocess.run([sys.executable, "-m", "kevin_tui", "replay", str(session.path), "--headless", "--json"],
                            capture_output=True, text=True)  # fmt: skip
    assert json_lines(replay.stdout) == turns
    assert [json.loads(line) for line in replay.stdout.splitlines()] == printed  # the evidence as recorded

    listing = subprocess.run([sys.executable, "-m", "kevin_tui", "sessions", "--sessions-dir",
                              str(tmp_path / "sessions")], capture_output=True, text=True)  # fmt: skip
    assert session.id in listing.stdout and "19_ReLU.py" in listing.stdout and "finished" in listing.stdout


def test_notes_and_resume_continue_the_history(tmp_path, script, optimize_here):
    replies = script(reply("slightly_wrong.py"), reply("relu_torch.py"))
    first = optimize_here("--turns", "1", "--backend", "scripted", "--script", str(replies))
    assert first.returncode == 0 and first.stdout.startswith("turn 1: incorrect")
    second = optimize_here("--turns", "1", "--resume", "last", "--note", "Use a grid-stride loop.",
                           "--backend", "scripted", "--script", str(replies))  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert second.stdout.startswith("turn 2:")
    session = only_session(tmp_path)
    last_prompt = session.of_type(PromptEvent)[-1].text
    assert "Here are your previous attempts:" in last_prompt
    assert "Here is a note from the user: Use a grid-stride loop." in last_prompt
    assert [e.turn for e in session.of_type(AttemptEvent)] == [1, 2]


def test_a_reply_without_a_summary_gets_one_follow_up_and_later_prompts_show_it(tmp_path, script, optimize_here):
    code_only = {"reasoning": THINKING, "answer": f"```python\n{candidate('relu_torch.py')}```\n"}
    replies = script(
        code_only,
        {"when": ["Summarize your changes in a few sentences"], "answer": "FOLLOW-UP-SUMMARY: clamped in place."},
        {"when": ["FOLLOW-UP-SUMMARY"], **reply("relu_torch.py")},
    )
    result = optimize_here("--turns", "2", "--json", "--no-timing", "--backend", "scripted", "--script", str(replies))
    assert result.returncode == 0, result.stderr
    session = only_session(tmp_path)
    first = session.of_type(KernelEvent)[0]
    assert (first.summary, first.summary_source) == ("FOLLOW-UP-SUMMARY: clamped in place.", "follow-up")
    assert "FOLLOW-UP-SUMMARY: clamped in place." in session.of_type(PromptEvent)[1].text
    assert "SECRET-CHAIN-OF-THOUGHT" not in session.of_type(PromptEvent)[1].text


def test_parallel_candidates_are_ranked_and_the_best_goes_on(tmp_path, script, optimize_here):
    replies = script(reply("slightly_wrong.py"), reply(None), reply("relu_torch.py"))
    result = optimize_here("--turns", "1", "--candidates", "3", "--json", "--backend", "scripted",
                           "--script", str(replies))  # fmt: skip
    assert result.returncode == 0, result.stderr
    (turn,) = json_lines(result.stdout)
    assert turn["status"] == "correct"
    session = only_session(tmp_path)
    statuses = sorted(e.verdict.status.value for e in session.of_type(EvaluationEvent))
    assert statuses == ["correct", "format_error", "incorrect"]
    assert session.of_type(AttemptEvent)[0].candidate == turn["candidate"]


def test_sigkill_mid_stream_keeps_the_session_and_resume_works(tmp_path, script, build_cache, optimize_here):
    replies = script({"reasoning": THINKING * 20, "answer": "```python\n" + candidate("relu_torch.py") + "```\nok"})
    env = {**os.environ, **REPO_PATH, "KEVIN_TUI_CACHE_DIR": str(build_cache)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kevin_tui", "optimize", str(RELU), "--headless", "--device", "cpu", "--turns", "2",
         "--sessions-dir", str(tmp_path / "sessions"), "--backend", "scripted", "--script", str(replies),
         "--script-rate", "200"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        files = list((tmp_path / "sessions").glob("*.jsonl")) if (tmp_path / "sessions").exists() else []
        if files and '"type": "prompt"' in files[0].read_text():
            break
        time.sleep(0.2)
    time.sleep(0.5)  # mid-stream
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    with open(files[0], "a") as f:
        f.write('{"type": "reply", "turn": 1, "reason')  # a write cut off by the kill
    session = load_session(files[0])
    assert session.state == "interrupted" and "incomplete" in session.warning
    assert session.of_type(PromptEvent) and not session.of_type(EvaluationEvent)
    resumed = optimize_here("--turns", "1", "--resume", session.id, "--backend", "scripted", "--script",
                            str(script(reply("relu_torch.py"))))  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert "line" in resumed.stderr and "incomplete" in resumed.stderr
    after = load_session(files[0])
    assert after.warning is None and after.state == "finished"


def test_an_unreachable_server_fails_clearly_and_keeps_nothing_broken(tmp_path, optimize_here):
    result = optimize_here("--turns", "2", "--server", "http://127.0.0.1:9", "--model", "kevin")
    assert result.returncode == 1 and "cannot reach the model server" in result.stderr
    assert "Traceback" not in result.stderr
    session = only_session(tmp_path)
    assert session.of_type(ErrorEvent) and f"--resume {session.id}" in result.stderr


def test_a_broken_problem_fails_before_any_model(tmp_path):
    result = optimize(tmp_path, "--turns", "1", "--backend", "scripted", "--script", "/nonexistent.json",
                      problem=PROBLEMS / "reference_raises.py")  # fmt: skip
    assert result.returncode == 2 and "reference forward raised" in result.stderr
    assert not (tmp_path / "sessions").exists() or not list((tmp_path / "sessions").glob("*.jsonl"))


def test_end_to_end_against_transformers_serve(tmp_path, tiny_model, served, optimize_here):
    result = optimize_here("--turns", "2", "--json", "--server", served, "--model", str(tiny_model),
                           "--max-tokens", "40", "--sampling-seed", "1")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert [t["status"] for t in json_lines(result.stdout)] == ["format_error", "format_error"]


def test_replay_the_shipped_example():
    (example,) = (Path(__file__).parents[1] / "sessions").glob("*.jsonl")
    result = subprocess.run([sys.executable, "-m", "kevin_tui", "replay", str(example), "--headless", "--json"],
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0 and result.stderr == ""
    turns = json_lines(result.stdout)
    assert len(turns) >= 3 and any(t["status"] == "correct" for t in turns)


def test_several_trajectories_side_by_side(tmp_path, script, optimize_here):
    replies = script(reply("slightly_wrong.py"), reply("relu_torch.py"), reply("relu_torch.py"), reply(None))
    result = optimize_here("--turns", "2", "--trajectories", "2", "--json", "--backend", "scripted",
                           "--script", str(replies))  # fmt: skip
    assert result.returncode == 0, result.stderr
    turns = json_lines(result.stdout)
    assert [(t["trajectory"], t["turn"]) for t in turns] == [(0, 1), (1, 1), (0, 2), (1, 2)]
    session = only_session(tmp_path)
    assert session.header.trajectories == 2
    second_prompts = [e for e in session.of_type(PromptEvent) if e.turn == 2]
    assert {e.trajectory for e in second_prompts} == {0, 1}
    by_trajectory = {e.trajectory: e.text for e in second_prompts}
    assert by_trajectory[0] != by_trajectory[1]  # each chain sees only its own history
    replay = subprocess.run([sys.executable, "-m", "kevin_tui", "replay", str(session.path), "--headless", "--json"],
                            capture_output=True, text=True)  # fmt: skip
    assert json_lines(replay.stdout) == turns


def test_accept_best_commits_the_fastest_correct_kernel_and_records_it(tmp_path, script, optimize_here, monkeypatch):
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    project = tmp_path / "proj"
    project.mkdir()
    problem = project / "relu.py"
    problem.write_text(RELU.read_text())
    replies = script(reply("relu_torch.py"), reply("slightly_wrong.py"))
    result = optimize_here("--turns", "2", "--accept", "best", "--accept-slower", "--git-init", "--backend",
                           "scripted", "--script", str(replies), problem=problem)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "accepted turn 1" in result.stderr
    session = only_session(tmp_path)
    (accept,) = session.of_type(AcceptEvent)
    assert session.state == "finished"  # the accept is recorded before the end
    log = subprocess.run(["git", "log", "--format=%H %s"], cwd=project, capture_output=True, text=True).stdout
    assert log.startswith(accept.commit) and "(turn 1)" in log
    assert "Session: " in subprocess.run(["git", "log", "-1", "--format=%B"], cwd=project, capture_output=True,
                                         text=True).stdout  # fmt: skip


def test_resume_when_the_problem_file_is_gone_uses_the_recorded_source(tmp_path, script, optimize_here):
    problem = tmp_path / "relu.py"
    problem.write_text(RELU.read_text())
    replies = script(reply("slightly_wrong.py"), reply("relu_torch.py"))
    assert optimize_here("--turns", "1", "--backend", "scripted", "--script", str(replies),
                         problem=problem).returncode == 0  # fmt: skip
    problem.unlink()
    resumed = optimize_here("--turns", "1", "--resume", "last", "--backend", "scripted", "--script", str(replies))
    assert resumed.returncode == 0, resumed.stderr
    assert "is gone since the session began" in resumed.stderr and resumed.stdout.startswith("turn 2:")


def test_a_slower_best_kernel_is_not_accepted_headless_without_accept_slower(tmp_path, script, optimize_here):
    """The in-process judge finds relu_slow.py slower by the compute ops it dispatches; the real
    evaluator's clock finding it slower is test_cli.py::test_a_slower_kernel_is_accepted_only_when_asked_as_in_the_app."""
    problem = tmp_path / "relu.py"
    problem.write_text(RELU.read_text())
    result = optimize_here("--turns", "1", "--accept", "best", "--backend", "scripted", "--script",
                           str(script(reply("relu_slow.py"))), "--timing-trials", "20", problem=problem)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "not accepted" in result.stderr and "--accept-slower" in result.stderr
    assert not (tmp_path / "relu_kernel.py").exists() and not only_session(tmp_path).of_type(AcceptEvent)


@pytest.mark.skipif(has_cuda_device(), reason="checks what a machine without a GPU says")
def test_without_a_gpu_or_a_server_it_says_what_to_do_at_once(tmp_path):
    started = time.monotonic()
    result = optimize(tmp_path, "--turns", "1", timeout=60)
    assert result.returncode == 2 and time.monotonic() - started < 20
    assert (
        "--server URL" in result.stderr
        and "kevin-tui demo" in result.stderr
        and "--backend transformers" in result.stderr
    )
    assert "saved" not in result.stderr and "Traceback" not in result.stderr and "retry" not in result.stderr.lower()
    assert not (tmp_path / "sessions").exists()


def test_resume_starts_the_sessions_backend_and_cuts_a_corrupt_line_first(tmp_path, script, optimize_here):
    """`optimize --resume last` with no model flags: the session's scripted backend and script, not
    the default (before: "Kevin-32B ... cannot run on this machine's CPU"). A corrupt line in the
    middle is moved to FILE.corrupt before the new turn is appended, so the new turn is read back."""
    replies = script(reply("slightly_wrong.py"), reply("relu_torch.py"))
    first = optimize_here("--turns", "1", "--backend", "scripted", "--script", str(replies))
    assert first.returncode == 0, first.stderr
    path = only_session(tmp_path).path
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]) + '{"type": "attempt", "tur\n' + lines[-1])  # corrupt, before the end
    resumed = optimize_here("--turns", "1", "--resume", "last")
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming as the session was started: --backend scripted --script" in resumed.stderr
    assert "is corrupt" in resumed.stderr and f"{path.name}.corrupt" in resumed.stderr
    assert resumed.stdout.startswith("turn 2: ")  # the script replays from its first reply
    session = load_session(path)
    assert session.warning is None and session.state == "finished" and session.turns == 2
    assert path.with_name(path.name + ".corrupt").read_text() == '{"type": "attempt", "tur\n' + lines[-1]

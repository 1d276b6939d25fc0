"""Batch mode end to end on the CPU: five KernelBench problems and a broken one, two trajectories of
three turns, scripted replies, real evaluation; killed with SIGKILL mid-run and resumed; the report
and the RL export checked against the recorded verdicts; a real `transformers serve` taking
concurrent requests; a local Ray instance giving the same report.

The resumed run, and the run without Ray that the Ray run is compared with, are judged in this process
by the tests' in-process judge (tests/fake_judge.py): what they prove is the run's (nothing lost or
redone, the protocol's verdicts, the report, the export). The run killed mid-way judges for real on
this machine's evaluator, and the Ray run is a whole batch judged for real."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kevin_tui.batch import runner
from kevin_tui.batch.manifest import Manifest
from kevin_tui.batch.results import load_run, turn_records
from kevin_tui.cli import main
from kevin_tui.session import load_session
from kevin_tui.session.events import EvaluationEvent, PromptEvent, ReplyEvent
from tests.batch_problems import PLANS, expected_statuses, write_script
from tests.conftest import PROBLEMS
from tests.fake_judge import InProcessJudge

REPO = Path(__file__).parents[1]
FAST_EVAL = ["--device", "cpu", "--timing-trials", "10", "--shapes", "off", "--trials", "2", "--no-live"]


def batch(tmp_path: Path, *args: str, cache: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "KEVIN_TUI_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-m", "kevin_tui", "batch", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path, env=env)  # fmt: skip


def batch_here(tmp_path: Path, *args: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
               cache: Path) -> subprocess.CompletedProcess:  # fmt: skip
    """`kevin-tui batch ARGS` in this process, from `tmp_path`, its kernels judged in process."""
    monkeypatch.setenv("KEVIN_TUI_CACHE_DIR", str(cache))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(runner, "Evaluator", InProcessJudge)  # the local judge runner.placement gives
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(["batch", *args])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, exited.value.code, out, err)


def statuses(run: Path) -> dict[str, list[list[str]]]:
    found: dict[str, list[list[str]]] = {}
    manifest = Manifest.load(run)
    for entry in manifest.problems:
        for index in range(manifest.protocol["trajectories"]):
            path = manifest.session_path(entry.key, index)
            if path.exists():
                kernels = turn_records(load_session(path))
                found.setdefault(entry.key, []).append([r.verdict.status.value for r in kernels])
    return found


def evaluations(run: Path) -> int:
    return sum(len(load_session(p).of_type(EvaluationEvent)) for p in (run / "sessions").glob("*.jsonl"))


def test_killed_mid_run_then_resumed_gives_the_protocols_verdicts_report_and_rl_data(tmp_path, build_cache,
                                                                                     monkeypatch, capsys):  # fmt: skip
    script = write_script(tmp_path / "script.json")
    problems = [str(p.path) for p in PLANS] + [str(PROBLEMS / "reference_raises.py")]
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO), "KEVIN_TUI_CACHE_DIR": str(build_cache)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kevin_tui", "batch", *problems, "--out", str(run), "--trajectories", "2", "--turns", "3",
         "--backend", "scripted", "--script", str(script), "--sampling-seed", "0", "--script-delay", "0.3", *FAST_EVAL],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tmp_path, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if (run / "sessions").exists() and evaluations(run) >= 6:
                break
            time.sleep(0.3)
        assert proc.poll() is None, "the run ended before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    before = evaluations(run)
    assert before >= 6 and Manifest.load(run).problems  # the manifest survived the kill whole

    # no model flags: the run's own scripted backend and script (before: "Kevin-32B ... cannot run on this CPU")
    resumed = batch_here(tmp_path, "--resume", str(run), "--export", "rl.jsonl", *FAST_EVAL, monkeypatch=monkeypatch,
                         capsys=capsys, cache=build_cache)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert evaluations(run) >= 30 and evaluations(run) <= 30 + 2  # nothing judged before the kill was lost or redone

    manifest = Manifest.load(run)
    states = {p.key: p.state for p in manifest.problems}
    assert states == {**{p.key: "done" for p in PLANS}, "reference_raises": "skipped"}
    assert "reference forward raised" in manifest.entry("reference_raises").reason
    assert statuses(run) == expected_statuses()  # whatever the order of requests, kill or not
    for path in (run / "sessions").glob("*.jsonl"):
        assert load_session(path).state == "finished"

    # the report: correctness by hand from the plans, speedups from the verdicts the sessions recorded
    report = json.loads((run / "report" / "report.json").read_text())["runs"][0]
    best, avg = report["overall"]["best"], report["overall"]["avg"]
    assert best["correctness"] == pytest.approx(4 / 5)  # every problem but Tanh has a correct trajectory
    assert avg["correctness"] == pytest.approx((2 + 1 + 0 + 1 + 2) / 10)
    trajectory_speedups = {}
    for path in (run / "sessions").glob("*.jsonl"):
        key = path.stem.rsplit(".t", 1)[0]
        speedups = [r.verdict.speedup for r in turn_records(load_session(path)) if r.verdict.status.value == "correct"]
        assert all(s and s > 0 for s in speedups)
        trajectory_speedups.setdefault(key, []).append(max(speedups, default=0.0))
    best_each = [max(v) for v in trajectory_speedups.values()]
    assert best["mean_speedup"] == pytest.approx(sum(best_each) / 5)
    assert avg["mean_speedup"] == pytest.approx(sum(sum(v) / 2 for v in trajectory_speedups.values()) / 5)
    assert best["fast"]["1.0"] == pytest.approx(sum(s > 1 for s in best_each) / 5)
    assert report["best_speedup_by_turn"]["best"][-1] == pytest.approx(best["mean_speedup"])
    rows = {p["problem"]: p for p in report["problems"]}
    assert rows["22_Tanh"]["correct"] == 0 and rows["19_ReLU"]["correct"] == 2
    assert (run / "report" / "speedup_by_turn.png").read_bytes()[:4] == b"\x89PNG"
    assert "| correctness | 80.0% | 60.0% |" in (run / "report" / "report.md").read_text()

    # the RL export: Kevin's reward per turn and its discounted return, by hand
    records = [json.loads(line) for line in (tmp_path / "rl.jsonl").read_text().splitlines()]
    assert len(records) == 30
    relu = sorted((r for r in records if r["problem"] == "19_ReLU" and r["trajectory"] == 0), key=lambda r: r["turn"])
    assert [r["verdict"]["status"] for r in relu] == ["compile_error", "incorrect", "correct"]
    s3 = 0.3 + relu[2]["verdict"]["speedup"]
    assert [r["reward"] for r in relu] == pytest.approx([0.0, 0.0, s3])
    assert [r["return"] for r in relu] == pytest.approx([0.16 * s3, 0.4 * s3, s3])
    assert relu[0]["prompt"].startswith("You are given the following architecture") and relu[0]["response"]["answer"]

    # two runs side by side
    other = tmp_path / "other"
    shutil.copytree(run, other)
    compared = subprocess.run([sys.executable, "-m", "kevin_tui", "batch", "report", str(run), str(other)],
                              capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)  # fmt: skip
    assert compared.returncode == 0, compared.stderr
    table = (run / "report-vs-other" / "report.md").read_text()
    assert "| run best@2 | run avg@2 | other best@2 | other avg@2 |" in table
    assert "| correctness | 80.0% | 60.0% | 80.0% | 60.0% |" in table


def test_requests_are_sent_concurrently_to_a_real_transformers_serve(tmp_path, tiny_model, served, build_cache,
                                                                     monkeypatch, capsys):  # fmt: skip
    """What the server is sent and when; the replies are judged in process (the real local judge is the killed
    run's above)."""
    result = batch_here(tmp_path, str(PLANS[0].path), "--out", "run", "--trajectories", "4", "--turns", "1",
                        "--concurrency", "4", "--server", served, "--model", str(tiny_model), "--max-tokens", "120",
                        "--sampling-seed", "1", *FAST_EVAL, monkeypatch=monkeypatch, capsys=capsys,
                        cache=build_cache)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    sessions = [load_session(p) for p in sorted((tmp_path / "run" / "sessions").glob("*.jsonl"))]
    assert len(sessions) == 4
    sent = [s.of_type(PromptEvent)[0].time for s in sessions]
    answered = [s.of_type(ReplyEvent)[0] for s in sessions]
    assert max(sent) < min(r.time for r in answered)  # all four were in flight together
    assert all(r.complete for r in answered)
    assert [s.header.sampling["seed"] for s in sessions] == [1, 2, 3, 4]  # independent samples, reproducible


def test_a_local_ray_instance_gives_the_same_report_as_without_ray(tmp_path, build_cache, monkeypatch, capsys):
    """The Ray run is a whole batch judged for real (each kernel by an evaluator in a Ray task); the run
    without Ray it is compared with is judged in process (the local real judge is the killed run's above)."""
    pytest.importorskip("ray")
    plans = PLANS[:2]
    script = write_script(tmp_path / "script.json", plans, turns=2)
    common = [str(p.path) for p in plans] + ["--trajectories", "2", "--turns", "2", "--backend", "scripted",
                                             "--script", str(script), "--sampling-seed", "0", *FAST_EVAL]  # fmt: skip
    here = batch_here(tmp_path, *common, "--out", "here", monkeypatch=monkeypatch, capsys=capsys, cache=build_cache)
    assert here.returncode == 0, here.stderr[-3000:]
    ray = batch(tmp_path, *common, "--out", "ray", "--ray", "local", cache=build_cache)
    assert ray.returncode == 0, ray.stderr[-3000:]
    assert statuses(tmp_path / "ray") == statuses(tmp_path / "here") == expected_statuses(plans, turns=2)

    def figures(run: str) -> dict:
        data = json.loads((tmp_path / run / "report" / "report.json").read_text())["runs"][0]
        speedups = {c: {k: v for k, v in data["overall"][c].items() if "speedup" in k} for c in ("best", "avg")}
        correctness = {c: data["overall"][c]["correctness"] for c in ("best", "avg")}
        problems = [(p["problem"], p["correct"], p["trajectories"]) for p in data["problems"]]
        return {
            "correctness": correctness,
            "problems": problems,
            "timed": {c: all(speedups[c].values()) for c in speedups},
        }

    assert figures("ray") == figures("here")
    outcome = load_run(tmp_path / "ray")
    assert all(k.speedup for p in outcome.problems for t in p.trajectories for k in t.kernels if k.correct)

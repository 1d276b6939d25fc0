"""The batch figures against hand computations, the scheduling gates, the manifest, and scripted
replies chosen by their prompt: no model, no evaluation."""

from __future__ import annotations

import asyncio
import json

import pytest

from kevin_tui.batch.manifest import Manifest, RunDirectoryError, problem_keys
from kevin_tui.batch.metrics import Kernel, Trajectory, best_by_turn, discounted_returns, reward, summarise
from kevin_tui.batch.scheduling import Lanes
from kevin_tui.models.base import Sampling, collect
from kevin_tui.models.scripted import ScriptedBackend

K = Kernel
# Three problems, two trajectories each, three turns at most. By hand, per trajectory (vs eager, vs compile):
#   A: t0 fastest correct 2.0 (1.5), t1 0.5 (0.3)     B: t0 1.6 (1.1), t1 none: 0      C: none, none
A = [
    Trajectory((K(1, "incorrect"), K(2, "correct", 1.2, 0.8), K(3, "correct", 2.0, 1.5))),
    Trajectory((K(1, "compile_error"), K(2, "correct", 0.5, 0.3), K(3, "incorrect"))),
]
B = [Trajectory((K(1, "correct", 1.6, 1.1),)), Trajectory((K(1, "incorrect"), K(2, "incorrect")))]
C = [Trajectory((K(1, "format_error"),)), Trajectory((K(1, "runtime_error"),))]


def test_best_and_avg_at_k_by_hand():
    figures = summarise([A, B, C], compile_timed=True)
    best, avg = figures["best"], figures["avg"]
    assert best.correctness == pytest.approx(2 / 3)  # A and B have a correct kernel
    assert avg.correctness == pytest.approx((1 + 0.5 + 0) / 3)
    assert best.mean_speedup == pytest.approx((2.0 + 1.6 + 0) / 3)  # incorrect counts 0
    assert avg.mean_speedup == pytest.approx(((2.0 + 0.5) / 2 + (1.6 + 0) / 2 + 0) / 3)
    assert best.geomean_speedup == pytest.approx((2.0 * 1.6) ** 0.5)  # over correct ones only
    assert avg.geomean_speedup == pytest.approx(((2.0 * 0.5) ** 0.5 * 1.6) ** 0.5)
    assert best.mean_speedup_compile == pytest.approx((1.5 + 1.1) / 3)
    assert best.geomean_speedup_compile == pytest.approx((1.5 * 1.1) ** 0.5)
    assert best.fast == pytest.approx({0.0: 2 / 3, 1.0: 2 / 3, 1.5: 2 / 3, 2.0: 0.0})  # 2.0 is not > 2
    assert avg.fast == pytest.approx({0.0: 0.5, 1.0: 1 / 3, 1.5: 1 / 3, 2.0: 0.0})


def test_without_compile_timings_those_figures_are_absent():
    assert summarise([A], compile_timed=False)["best"].mean_speedup_compile is None


def test_best_speedup_by_turn_by_hand():
    curve = best_by_turn([A, B, C], turns=3)
    assert curve["best"] == pytest.approx([1.6 / 3, (1.2 + 1.6) / 3, (2.0 + 1.6) / 3])
    assert curve["avg"] == pytest.approx([0.8 / 3, (0.85 + 0.8) / 3, (1.25 + 0.8) / 3])


def test_kevins_reward_and_discounted_returns_by_hand():
    rewards = [reward(k) for k in A[0].kernels]
    assert rewards == pytest.approx([0.0, 0.3 + 1.2, 0.3 + 2.0])
    # R_t = s_t + 0.4 s_{t+1} + 0.16 s_{t+2}
    assert discounted_returns(rewards) == pytest.approx([0.4 * 1.5 + 0.16 * 2.3, 1.5 + 0.4 * 2.3, 2.3])
    assert reward(K(1, "correct")) == pytest.approx(0.3)  # correct but untimed: the bonus alone


def test_an_untimed_or_incorrect_kernel_counts_zero_and_a_trajectory_is_its_fastest_correct_kernel():
    trajectory = Trajectory((K(1, "correct", 1.4), K(2, "incorrect", 9.0), K(3, "correct", 1.1)))
    assert trajectory.speedup() == 1.4 and trajectory.speedup(by_turn=1) == 1.4
    assert Trajectory((K(1, "compiled", 3.0),)).speedup() == 0.0


def test_problem_keys_are_stems_and_collisions_take_their_folder(tmp_path):
    paths = [tmp_path / "level1" / "1_A.py", tmp_path / "level2" / "1_A.py", tmp_path / "level1" / "2_B.py"]
    assert problem_keys(paths) == ["level1-1_A", "level2-1_A", "2_B"]


def test_a_run_directory_is_never_overwritten(tmp_path):
    problem = tmp_path / "p.py"
    problem.write_text("class Model: pass\n")
    Manifest.create(tmp_path / "run", {"trajectories": 1, "turns": 1}, [problem])
    with pytest.raises(RunDirectoryError, match="--resume"):
        Manifest.create(tmp_path / "run", {"trajectories": 1, "turns": 1}, [problem])
    assert Manifest.load(tmp_path / "run").problems[0].sha256
    with pytest.raises(RunDirectoryError, match="not a batch run"):
        Manifest.load(tmp_path)


def test_a_shared_device_times_nothing_while_the_model_generates_and_builds_are_limited():
    async def run() -> list[str]:
        lanes = Lanes(concurrency=2, build_jobs=1, devices=["cuda:0"], shared={"cuda:0"})
        gate = lanes.gate("cuda:0")
        log: list[str] = []
        building = 0

        async def generate(name: str) -> None:
            async with gate.generating():
                log.append(f"gen {name}")
                await asyncio.sleep(0.05)
                log.append(f"gen {name} done")

        async def build_and_time(name: str) -> None:
            nonlocal building
            async with gate.building():
                building += 1
                assert building == 1, "two builds at once with build_jobs=1"
                await asyncio.sleep(0.01)
                building -= 1
            async with gate.evaluating():
                log.append(f"time {name}")
                await asyncio.sleep(0.02)
                log.append(f"time {name} done")

        await asyncio.gather(generate("1"), build_and_time("k1"), build_and_time("k2"), generate("2"))
        return log

    log = asyncio.run(run())
    generating = 0
    for entry in log:
        if entry.startswith("gen"):
            generating += -1 if entry.endswith("done") else 1
        elif not entry.endswith("done"):
            assert generating == 0, log
    assert sum(e.startswith("time") for e in log) == 4


def test_no_build_runs_while_a_kernel_is_judged_on_this_machine():
    """Batch builds other problems' kernels beside generation, never beside a judgement: a build on
    2 cores beside a timing got an honest softmax rejected by the host's clock."""

    async def run() -> list[tuple[str, str]]:
        lanes = Lanes(concurrency=4, build_jobs=2, devices=["cpu"], shared=set())
        log: list[tuple[str, str]] = []

        async def build(name: str, delay: float) -> None:
            await asyncio.sleep(delay)
            async with lanes.gate("cpu").building():
                log.append(("build", name))
                await asyncio.sleep(0.05)
                log.append(("build done", name))

        async def judge(name: str, delay: float) -> None:
            await asyncio.sleep(delay)
            async with lanes.gate("cpu").evaluating():
                log.append(("judge", name))
                await asyncio.sleep(0.05)
                log.append(("judge done", name))

        # a build running when a judgement arrives, one asked for during the judgement, two at once
        await asyncio.gather(build("a", 0), build("b", 0), judge("k1", 0.01), build("c", 0.03), judge("k2", 0.2),
                             build("d", 0.21))  # fmt: skip
        return log

    log = asyncio.run(run())
    building = judging = 0
    for event, _ in log:
        building += {"build": 1, "build done": -1}.get(event, 0)
        judging += {"judge": 1, "judge done": -1}.get(event, 0)
        assert not (building and judging), log
    assert max(i for i, (e, n) in enumerate(log) if n in "ab") < log.index(("judge", "k1"))  # it waited for both
    assert log.index(("judge done", "k1")) < log.index(("build", "c"))  # held back until it ended
    both = [n for e, n in log[:2]]
    assert sorted(both) == ["a", "b"]  # builds still run beside each other


def test_scripted_replies_follow_their_prompt_and_the_seed(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps([
        {"answer": "first, branch a", "when": ["problem X"]},
        {"answer": "first, branch b", "when": ["problem X"]},
        {"answer": "after a", "when": ["problem X", "branch a"]},
    ]))  # fmt: skip
    backend = ScriptedBackend(script)

    def ask(prompt: str, seed: int | None = None) -> str:
        return asyncio.run(collect(backend.stream([{"content": prompt}], Sampling(seed=seed)))).answer

    assert ask("problem X", seed=1) == "first, branch b" and ask("problem X", seed=0) == "first, branch a"
    assert ask("problem X ... first, branch a") == "after a"  # the most specific match wins
    assert [ask("problem X again"), ask("problem X again")] == ["first, branch a", "first, branch b"]


def test_batch_usage_errors_are_said_at_once(tmp_path, capsys):
    from kevin_tui.cli import main

    for argv, said in ((["batch", "--backend", "scripted", "--script", "x.json"], "needs problem files"),
                       (["batch", "report", str(tmp_path)], "not a batch run"),
                       (["batch", "p.py", "--resume", str(tmp_path)], "give no problem files")):  # fmt: skip
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2 and said in capsys.readouterr().err

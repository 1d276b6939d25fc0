"""Training data out: every judged turn of a run as one JSON line (prompt, response, verdict,
reward), so a batch run doubles as the environment for multi-turn RL.

The reward is Kevin's score for the turn's kernel (0.3 for a correct kernel plus its speedup, 0
when it is not correct) and `return` its discounted sum with the later turns of its trajectory
(gamma 0.4), as Kevin was trained (kevin_tui.batch.metrics). Sessions are read one at a time, so a
large run is never held in memory.
"""

from __future__ import annotations

from pathlib import Path

from kevin_tui.batch.manifest import Manifest
from kevin_tui.batch.metrics import GAMMA, Kernel, discounted_returns, reward
from kevin_tui.batch.results import turn_records
from kevin_tui.session import SessionError, load_session
from kevin_tui.session.writer import json_line


def export_rl(directory: Path, out: Path, gamma: float = GAMMA) -> int:
    """Write the records of every session in the run to `out`; returns how many were written."""
    manifest = Manifest.load(directory)
    written = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as file:
        for entry in manifest.problems:
            for trajectory in range(int(manifest.protocol["trajectories"])):
                path = manifest.session_path(entry.key, trajectory)
                if not path.exists():
                    continue
                try:
                    session = load_session(path)
                except SessionError:
                    continue
                records = turn_records(session)
                verdicts = [r.verdict for r in records]
                kernels = [Kernel(r.ref.turn, v.status.value, v.speedup, v.speedup_compile)
                           for r, v in zip(records, verdicts, strict=True) if v is not None]  # fmt: skip
                rewards = [reward(k) for k in kernels]
                for record, kernel, score, value in zip(records, kernels, rewards, discounted_returns(rewards, gamma),
                                                        strict=True):  # fmt: skip
                    verdict = record.verdict
                    line = {
                        "problem": entry.key, "trajectory": trajectory, "turn": kernel.turn,
                        "prompt": record.prompt.text if record.prompt else None,
                        "response": {"reasoning": record.reply.reasoning if record.reply else "",
                                     "answer": record.reply.answer if record.reply else ""},
                        "verdict": {"status": kernel.status, "speedup": kernel.speedup,
                                    "speedup_compile": kernel.speedup_compile,
                                    "message": verdict.message if verdict else ""},
                        "reward": score, "return": value, "gamma": gamma,
                        "trajectory_finished": session.state == "finished", "model": session.header.model,
                    }  # fmt: skip
                    file.write(json_line(line))
                    written += 1
    return written

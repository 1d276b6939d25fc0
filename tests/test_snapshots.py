"""Snapshots of the main screens (pytest-textual-snapshot); update with `pytest --snapshot-update`."""

from pathlib import Path

from kevin_tui.session import load_session
from kevin_tui.tui.app import KevinApp

EXAMPLE = Path(__file__).parents[1] / "sessions" / "example-relu.jsonl"


def replay_app() -> KevinApp:
    return KevinApp(session=load_session(EXAMPLE))


def test_replay_reasoning_and_verdict(snap_compare):
    assert snap_compare(replay_app(), terminal_size=(100, 30), press=["down"])


def test_replay_kernel_with_compile_error_at_80x24(snap_compare):
    assert snap_compare(replay_app(), terminal_size=(80, 24), press=["k"])


def test_replay_diff_against_the_best(snap_compare):
    assert snap_compare(replay_app(), terminal_size=(100, 30), press=["down", "down", "down", "d"])

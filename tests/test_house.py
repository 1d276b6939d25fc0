"""Seams of the house (issue 23): one owner per decision, checked without starting a worker."""

from __future__ import annotations

import re
from pathlib import Path

import kevin_tui
from kevin_tui.evaluator.verdict import Status, Verdict

PACKAGE = Path(kevin_tui.__file__).parent


def lines_matching(pattern: str, files: list[Path]) -> list[str]:
    return [f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}" for path in files
            for number, line in enumerate(path.read_text().splitlines(), 1) if re.search(pattern, line)]  # fmt: skip


def test_a_later_finding_overrules_a_verdict_in_one_place():
    verdict = Verdict(Status.CORRECT, "correct, 2.00x", speedup=2.0, speedup_compile=1.5, speedup_interval=[1.9, 2.1])
    finding = "compute-sanitizer memcheck: Invalid __global__ write"
    verdict.overrule(Status.INCORRECT, finding, "unsanitized_status")
    assert (verdict.status, verdict.message) == (Status.INCORRECT, finding)
    assert verdict.speedup is verdict.speedup_compile is verdict.speedup_interval is None
    assert verdict.details["unsanitized_status"] == "correct"
    # nothing else on the host's side sets a reached verdict's status
    host = sorted((PACKAGE / "evaluator" / "host").glob("*.py"))
    assert lines_matching(r"\.status\s*(,[^=]*)?=(?!=)", host) == []


def test_the_host_side_is_handed_narrow_objects_and_names_its_classes_apart_from_the_workers():
    host, worker = PACKAGE / "evaluator" / "host", PACKAGE / "evaluator" / "worker"
    handed = [host / "candidate_run.py", host / "ncu.py", host / "sanitizer.py"]
    assert lines_matching(r"(?<![\w.])evaluator\.|\bEvaluator\b", handed) == []  # a RunContext, an OpenToolRun

    def classes(folder: Path) -> set[str]:
        return {name for path in folder.glob("*.py") for name in re.findall(r"^class (\w+)", path.read_text(), re.M)}

    assert classes(host) & classes(worker) == set()  # the trust boundary is visible in the names


LAYOUT_LITERAL = (
    r"[\"'][^\"' ]*(torch_extension_pch|\.gch|\.lock|\.used|\.wanted)[^\"' ]*[\"']|/ [\"'](pch|staging)[\"']"
)


def test_the_header_cache_layout_is_known_in_one_module(tmp_path):
    from kevin_tui.evaluator import header_cache
    from kevin_tui.evaluator.host.cache import Manifests, install_pch, usable_pch
    from kevin_tui.evaluator.worker.pch import pch_flags

    made = header_cache.staging(tmp_path) / "made-by-the-trusted-step"
    made.mkdir(parents=True)
    (made / header_cache.HEADER).write_text(header_cache.HEADER_TEXT)
    (made / header_cache.COMPILED).write_bytes(b"g++'s header")
    assert header_cache.one_being_made(tmp_path) and not header_cache.any_made(tmp_path)
    store, key, manifests = header_cache.store(tmp_path), "0123456789abcdef0123", Manifests(tmp_path / "manifests")
    store.mkdir()
    assert install_pch(made, store, key, manifests)  # the host installs it where the builder and the app look
    assert header_cache.any_made(tmp_path) and usable_pch(store, key, manifests)
    assert pch_flags(store, key) == ["-include", str(store / key / header_cache.HEADER)]
    others = [p for p in sorted(PACKAGE.rglob("*.py")) if p.name != "header_cache.py"]
    assert lines_matching(LAYOUT_LITERAL, others) == []


def test_the_profile_note_is_worded_in_the_protocol_and_the_tui_only_sends_it():
    from kevin_tui.protocol.notes import profile_note

    evidence = {"profile": {"kernels": [["relu_kernel", 1, 0.0125]], "ops": []}, "coverage": 0.93}
    note = profile_note(evidence)
    assert note == "Profile of one forward call: relu_kernel 0.013 ms x1. 93% of the time is in your own kernels."
    tui = sorted((PACKAGE / "tui").glob("*.py"))
    assert lines_matching(r"Profile of one forward|profile_digest", tui) == []
    assert lines_matching(r"from kevin_tui\.protocol\.notes import profile_note", tui)


def edited_prompts(tmp_path: Path) -> Path:
    """An override directory of the default set, with feedback.md about to be edited."""
    from kevin_tui.protocol.templates import export_templates

    directory = tmp_path / "prompts"
    export_templates(directory)
    return directory


def edit(directory: Path, name: str) -> None:
    path = directory / name
    path.write_text(path.read_text() + "\nOne more sentence.\n")


def test_a_changed_prompt_set_is_named_by_the_files_that_changed(tmp_path):
    from kevin_tui.protocol.templates import load_templates, prompts_change

    directory = edited_prompts(tmp_path)
    before = load_templates(directory)
    assert prompts_change(before.version, before.fingerprints, load_templates(directory)) is None
    edit(directory, "feedback.md")
    edit(directory, "note.md")
    change = prompts_change(before.version, before.fingerprints, load_templates(directory))
    assert change is not None and change.endswith(": feedback.md, note.md changed") and before.version in change
    # a session from before the files' hashes were recorded: the change is still said, without the names
    assert "was not recorded" in str(prompts_change(before.version, {}, load_templates(directory)))


def test_batch_resume_refuses_a_run_whose_prompt_set_changed_and_names_what(tmp_path):
    import pytest

    from kevin_tui.batch.manifest import Manifest, RunDirectoryError
    from kevin_tui.batch.runner import protocol_of, resumed_config
    from kevin_tui.config import BatchConfig, ProblemConfig

    directory = edited_prompts(tmp_path)
    config = BatchConfig(problem=ProblemConfig(prompts=directory), out=tmp_path / "run")
    manifest = Manifest.create(
        config.out, protocol_of(config), [Path(__file__).parent / "problems" / "small_matmul.py"]
    )
    assert resumed_config(config, Manifest.load(config.out)).problem.prompts == directory
    edit(directory, "refine.md")
    with pytest.raises(RunDirectoryError, match=r"refine\.md changed; restore them"):
        resumed_config(config, Manifest.load(manifest.directory))


def test_optimize_resume_names_the_prompt_files_changed_since_the_session(tmp_path, capsys):
    from kevin_tui.arguments import build_parser
    from kevin_tui.cli import resumed_launch
    from kevin_tui.config import ProblemConfig, RunConfig
    from kevin_tui.protocol.templates import load_templates
    from kevin_tui.session import Header, SessionWriter

    directory = edited_prompts(tmp_path)
    templates = load_templates(directory)
    header = Header(id="s", created="now", problem={"path": "p.py", "sha256": "x", "source": ""}, model="m",
                    backend="scripted", prompts_version=templates.version, prompts_files=templates.fingerprints)  # fmt: skip
    SessionWriter(tmp_path / "s.jsonl", header).close()
    edit(directory, "base.md")
    args = build_parser().parse_args(["optimize", "--resume", str(tmp_path / "s.jsonl")])
    problem = ProblemConfig(resume=str(tmp_path / "s.jsonl"), sessions_dir=tmp_path, prompts=directory)
    resumed_launch(RunConfig(problem=problem), args)
    said = capsys.readouterr().err
    assert "resuming with other prompts" in said and "base.md changed" in said, said


def test_a_build_staged_by_another_process_sharing_the_cache_is_no_tampering(tmp_path):
    """Two kevin-tui processes (or two test processes) share a build cache: a library in another's staging
    directory moves away when its build ends. That rejected an honest candidate ("the build cache entry
    .tmp-... was changed while this candidate ran"); a finished library that changes is still tampering."""
    from kevin_tui.evaluator.host.builds import STAGING, BuildBroker
    from kevin_tui.evaluator.host.sandbox import Limits, choose

    broker = BuildBroker(tmp_path / "builds", choose("off"), {}, Limits(), tmp_path / "scratch")
    staged = broker.root / f"{STAGING}relu-0123-abcd" / "relu.so"
    finished = broker.root / "relu-4567" / "relu.so"
    for library in (staged, finished):
        library.parent.mkdir(parents=True)
        library.write_bytes(b"\x7fELF")
    before = broker.libraries()
    staged.unlink()
    assert broker.tampered(before) == []
    finished.write_bytes(b"\x7fELF changed")
    assert broker.tampered(before) == [str(finished)]


def test_an_entry_another_process_removes_or_rebuilds_is_no_tampering(tmp_path):
    """Two test processes share one build cache: one removed an entry left by an earlier run and built it
    again while the other judged a candidate, which was `rejected` ("the build cache entry rt4_ballast_small-...
    was changed while this candidate ran"). A removed library is never loaded (it is rebuilt), and a
    rebuilt one is recorded right after it moves in; a changed library that stays unrecorded still counts."""
    import threading

    from kevin_tui.evaluator.host.builds import BuildBroker
    from kevin_tui.evaluator.host.sandbox import Limits, choose

    broker = BuildBroker(tmp_path / "builds", choose("off"), {}, Limits(), tmp_path / "scratch")
    removed, rebuilt, forged = (broker.root / f"{name}-0123" / f"{name}.so" for name in ("gone", "again", "forged"))
    for library in (removed, rebuilt, forged):
        library.parent.mkdir(parents=True)
        library.write_bytes(b"\x7fELF")
        broker.manifests.record(library.parent.name, library, name=library.stem, headers="standard")
    before = broker.libraries()
    removed.unlink()
    rebuilt.write_bytes(b"\x7fELF rebuilt")
    forged.write_bytes(b"\x7fELF forged")
    recording = threading.Timer(0.3, broker.manifests.record, (rebuilt.parent.name, rebuilt),
                                {"name": "again", "headers": "standard"})  # fmt: skip
    recording.start()
    assert broker.tampered(before) == [str(forged)]
    recording.join()

"""The typed run configuration, built once from config files and flags (flags win)."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from kevin_tui.arguments import apply_settings, batch_config, build_parser, eval_options, run_config
from kevin_tui.config import ConfigError, load_settings
from kevin_tui.devices import resolve_device
from kevin_tui.evaluator.worker.common import EnvironmentProblem
from kevin_tui.evaluator.worker.common import resolve_device as worker_device
from kevin_tui.models.factory import NoModel
from tests.conftest import has_cuda_device


def test_project_file_overrides_user_file_and_flags_override_both(tmp_path):
    user = tmp_path / "user.toml"
    user.write_text('model = "user/model"\nbudget = 4096\ndevice = "cpu"\n[sampling]\ntemperature = 0.6\n')
    project = tmp_path / "kevin-tui.toml"
    project.write_text('server = "http://gpu:8000"\nbudget = 6000\n[keys]\ncontinue = "space"\n')
    settings = load_settings([user, project])
    parser = build_parser()
    assert apply_settings(parser, settings) == []
    config = run_config(parser.parse_args(["optimize", "p.py"]), settings)
    assert (config.backend.model, config.backend.server, config.problem.budget) == (
        "user/model",
        "http://gpu:8000",
        6000,
    )
    assert config.backend.sampling.temperature == 0.6 and config.problem.evaluation.device == "cpu"
    assert config.keys == {"continue": "space"} and config.problem.problem == Path("p.py")
    assert config.backend.resolve().name == "openai"
    flags = run_config(parser.parse_args(["optimize", "p.py", "--budget", "100", "--eval-device", "cuda:1"]), settings)
    assert flags.problem.budget == 100 and flags.problem.evaluation.device == "cuda:1"


def test_unknown_settings_are_reported_and_broken_files_are_errors(tmp_path):
    bad = tmp_path / "kevin-tui.toml"
    bad.write_text("budget = \n")
    with pytest.raises(ConfigError, match=r"kevin-tui\.toml"):
        load_settings([bad])
    bad.write_text("colour = 'blue'\n")
    assert apply_settings(build_parser(), load_settings([bad])) == ["colour"]


def test_the_cli_reads_the_project_file(tmp_path):
    (tmp_path / "kevin-tui.toml").write_text("budget = 1234\nnonsense = 1\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(Path(__file__).parents[1])}
    result = subprocess.run([sys.executable, "-m", "kevin_tui", "sessions", "--sessions-dir", str(tmp_path)],
                            capture_output=True, text=True, cwd=tmp_path, env=env)  # fmt: skip
    assert "ignoring unknown setting 'nonsense'" in result.stderr


def test_without_a_gpu_or_a_server_no_backend_is_chosen(monkeypatch):
    monkeypatch.setattr("kevin_tui.devices.has_gpu", lambda: False)
    parser = build_parser()
    for flags in ([], ["--backend", "transformers"]):
        config = run_config(parser.parse_args(["optimize", "p.py", *flags]), load_settings([]))
        with pytest.raises(NoModel, match="--server URL") as caught:
            config.backend.resolve()
        assert caught.value.exit_code == 2
    small = run_config(parser.parse_args(["optimize", "p.py", "--backend", "transformers", "--model", "/m"]),
                       load_settings([]))  # fmt: skip
    assert small.backend.resolve().name == "transformers"


def test_the_backends_are_asked_their_capabilities_and_refuse_before_anything_starts(monkeypatch, tmp_path):
    from kevin_tui.models.backends import VllmOptions, scripted_config
    from kevin_tui.models.registry import kinds

    monkeypatch.setattr("kevin_tui.devices.has_gpu", lambda: True)
    parser = build_parser()
    names = [kind.name for kind in kinds()]
    assert names == ["openai", "vllm", "transformers", "scripted"]
    vllm = run_config(parser.parse_args(["optimize", "p.py", "--tensor-parallel-size", "2"]), load_settings([]))
    kind = vllm.backend.resolve()  # auto, with a GPU: the managed server
    assert kind.name == "vllm" and kind.capabilities.local_gpu and kind.devices(vllm.backend) == {"cuda:0", "cuda:1"}
    assert vllm.backend.options_for(kind) == VllmOptions(tensor_parallel_size=2)
    for flags, message in ((["--backend", "vllm", "--server", "http://x"], "exclude each other"),
                           (["--backend", "openai"], "needs --server URL"),
                           (["--backend", "scripted"], "needs --script")):  # fmt: skip
        with pytest.raises(NoModel, match=message):
            run_config(parser.parse_args(["optimize", "p.py", *flags]), load_settings([])).backend.resolve()
    scripted = scripted_config(tmp_path / "replies.json", 50.0)
    assert scripted.resolve().capabilities.scripted and not scripted.resolve().capabilities.local_gpu
    assert scripted.label() == "scripted:replies.json"


def test_speed_of_light_figures_and_the_sandbox_come_from_the_configuration(tmp_path):
    project = tmp_path / "kevin-tui.toml"
    project.write_text('sandbox = "required"\nshapes = "strict"\n[peaks."RTX 6000 Ada"]\nbandwidth_gbs = 960\n'
                       "fp32_tflops = 91.1\ntensor_tflops = 364\n")  # fmt: skip
    settings = load_settings([project])
    parser = build_parser()
    assert apply_settings(parser, settings) == []
    evaluation = run_config(parser.parse_args(["optimize", "p.py"]), settings).problem.evaluation
    assert evaluation.peaks == {"RTX 6000 Ada": {"bandwidth_gbs": 960, "fp32_tflops": 91.1, "tensor_tflops": 364}}
    assert evaluation.sandbox == "required" and evaluation.shapes == "strict"


def test_every_command_that_evaluates_reads_the_configs_peaks_and_the_options_are_frozen(tmp_path):
    """Batch mode once built its options without the config file's [peaks]."""
    project = tmp_path / "kevin-tui.toml"
    project.write_text('shapes = "strict"\n[peaks."H100"]\nbandwidth_gbs = 3350\nfp32_tflops = 67\n')
    settings = load_settings([project])
    parser = build_parser()
    apply_settings(parser, settings)
    peaks = {"H100": {"bandwidth_gbs": 3350, "fp32_tflops": 67}}
    batch = batch_config(parser.parse_args(["batch", "p.py"]), settings).problem.evaluation
    optimize = run_config(parser.parse_args(["optimize", "p.py"]), settings).problem.evaluation
    evaluate = eval_options(parser.parse_args(["eval", "p.py", "c.py"]), settings)
    assert batch.peaks == optimize.peaks == evaluate.peaks == peaks
    assert batch.shapes == optimize.shapes == evaluate.shapes == "strict"
    with pytest.raises(dataclasses.FrozenInstanceError):
        batch.device = "cuda"  # type: ignore[misc]


def test_device_auto_and_cuda_are_read_one_way():
    assert [resolve_device(d, lambda: True) for d in ("auto", "cuda", "cuda:1", "cpu")] == [
        "cuda:0", "cuda:0", "cuda:1", "cpu",
    ]  # fmt: skip
    assert resolve_device("auto", lambda: False) == "cpu"


@pytest.mark.skipif(has_cuda_device(), reason="reads a machine without a GPU")
def test_a_worker_reads_the_device_the_same_way_and_says_why_a_gpu_is_missing():
    assert worker_device("auto") == "cpu"  # torch, not the device node, says there is no GPU here
    with pytest.raises(EnvironmentProblem, match="--device cuda asked for"):
        worker_device("cuda")

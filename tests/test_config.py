import subprocess
import sys
from pathlib import Path

import pytest

from kevin_tui.cli import build_parser
from kevin_tui.config import ConfigError, apply_config, load_config


def test_project_file_overrides_user_file_and_flags_override_both(tmp_path):
    user = tmp_path / "user.toml"
    user.write_text('model = "user/model"\nbudget = 4096\n[sampling]\ntemperature = 0.6\n')
    project = tmp_path / "kevin-tui.toml"
    project.write_text('server = "http://gpu:8000"\nbudget = 6000\n[keys]\ncontinue = "space"\n')
    config = load_config([user, project])
    parser = build_parser()
    assert apply_config(parser, config) == []
    args = parser.parse_args(["optimize", "p.py"])
    assert (args.model, args.server, args.budget, args.temperature) == ("user/model", "http://gpu:8000", 6000, 0.6)
    assert config["keys"] == {"continue": "space"}
    assert parser.parse_args(["optimize", "p.py", "--budget", "100"]).budget == 100


def test_unknown_settings_are_reported_and_broken_files_are_errors(tmp_path):
    bad = tmp_path / "kevin-tui.toml"
    bad.write_text("budget = \n")
    with pytest.raises(ConfigError, match=r"kevin-tui\.toml"):
        load_config([bad])
    bad.write_text("colour = 'blue'\n")
    assert apply_config(build_parser(), load_config([bad])) == ["colour"]


def test_the_cli_reads_the_project_file(tmp_path):
    (tmp_path / "kevin-tui.toml").write_text("budget = 1234\nnonsense = 1\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(Path(__file__).parents[1])}
    result = subprocess.run([sys.executable, "-m", "kevin_tui", "sessions", "--sessions-dir", str(tmp_path)],
                            capture_output=True, text=True, cwd=tmp_path, env=env)  # fmt: skip
    assert "ignoring unknown setting 'nonsense'" in result.stderr

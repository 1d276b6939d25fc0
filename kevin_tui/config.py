"""Configuration files: defaults for the command line, so flags always win.

Read in order, later files overriding earlier ones: `$XDG_CONFIG_HOME/kevin-tui/config.toml`
(`~/.config/...`), then `kevin-tui.toml` in the current directory. Top-level keys are the long
option names with `_` for `-` (`model`, `server`, `budget`, `device`, `temperature`, ...); a
`[sampling]` table is accepted for the sampling options, and `[keys]` remaps TUI keys
(`continue = "space"`).
"""

from __future__ import annotations

import argparse
import os
import tomllib
from pathlib import Path
from typing import Any

PROJECT_FILE = "kevin-tui.toml"


class ConfigError(Exception):
    pass


def config_files(cwd: Path | None = None) -> list[Path]:
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return [base / "kevin-tui" / "config.toml", (cwd or Path.cwd()) / PROJECT_FILE]


def load_config(files: list[Path] | None = None) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for path in files if files is not None else config_files():
        if not path.exists():
            continue
        try:
            data = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: {exc}") from None
        sampling = data.pop("sampling", {})
        keys = data.pop("keys", {})
        merged.update({k.replace("-", "_"): v for k, v in {**data, **sampling}.items()})
        merged.setdefault("keys", {}).update(keys)
        merged.setdefault("_sources", []).append(str(path))
    return merged


def apply_config(parser: argparse.ArgumentParser, config: dict[str, Any]) -> list[str]:
    """Set the config's values as defaults on every subcommand that has the option; returns unknown keys."""
    settings = {k: v for k, v in config.items() if k not in ("keys", "_sources")}
    used: set[str] = set()
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for action in subparsers:
        for sub in action.choices.values():
            dests = {a.dest for a in sub._actions}
            known = {k: v for k, v in settings.items() if k in dests}
            sub.set_defaults(**known)
            used.update(known)
    return sorted(set(settings) - used)

"""Prompt templates: editable `.md` files with `${name}` placeholders (string.Template).

`$`-placeholders rather than `{}` because the templates are full of C++ and Python braces.
The shipped sets are directories of `kevin_tui/prompts/` (installed as `kevin_tui.prompts`): `kevin`,
the text Kevin-32B was trained on and the default, and `kevin-tui`, kevin-tui's own wording. A spec
names a set, or is a directory of overrides in which missing files fall back to the default set; a
file there that is no template's is an error (a misspelt name would otherwise be ignored). A
project's `./prompts/` is such a directory, used when no other is named; `kevin-tui prompts export`
writes one to edit. A file may open with an HTML comment (`<!-- ... -->`): it documents the file and
is never sent.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template

from kevin_tui.errors import EXIT_USAGE, KevinError

NAMES = (
    "base", "example", "answer_format", "history_header", "attempt", "edited", "note", "refine",
    "feedback", "summary_request", "speed_of_light",
)  # fmt: skip
INLINE = ("edited",)  # pasted into a line of another template, so their final newline is dropped
SETS = ("kevin", "kevin-tui")
DEFAULT_SET = "kevin"
HEADER = re.compile(r"\A<!--.*?-->\n?", re.S)
FILES = tuple(f"{name}.md" for name in NAMES)
PROJECT_DIR = "prompts"  # a project's own templates, beside where kevin-tui runs


class TemplateError(KevinError):
    """A template set or file that cannot be used (an unknown set name, a broken override)."""

    exit_code = EXIT_USAGE


@dataclass(frozen=True)
class Templates:
    texts: dict[str, str]
    source: str = DEFAULT_SET  # where they came from: a set's name, or "DIR (over SET)"

    def render(self, name: str, **values: object) -> str:
        return Template(self.texts[name]).safe_substitute({k: str(v) for k, v in values.items()})

    def feedback(self, status: str, **values: object) -> str:
        sections = dict(re.findall(r"^## (\w+)\n(.*?)(?=^## |\Z)", self.texts["feedback"], re.M | re.S))
        if status not in sections:
            raise TemplateError(f"feedback.md has no section '## {status}'")
        return Template(sections[status].strip()).safe_substitute({k: str(v) for k, v in values.items()})

    @property
    def version(self) -> str:
        """A short hash of the text the templates send (comments excluded), recorded in sessions."""
        joined = "\0".join(f"{k}\0{self.texts[k]}" for k in sorted(self.texts))
        return hashlib.sha256(joined.encode()).hexdigest()[:12]

    @property
    def fingerprints(self) -> dict[str, str]:
        """Each file's short hash (comments excluded), recorded beside `version` so that a resume can name
        the files that changed."""
        return {f"{name}.md": hashlib.sha256(self.texts[name].encode()).hexdigest()[:12] for name in sorted(self.texts)}


def prompts_change(version: str, fingerprints: dict[str, str] | None, now: Templates) -> str | None:
    """How `now` differs from the prompt set a session or a run recorded (`version`, `fingerprints`), in
    words; None when it does not, or nothing was recorded."""
    if not version or version == now.version:
        return None
    if fingerprints:
        current = now.fingerprints
        names = sorted(set(fingerprints) | set(current))
        changed = [name for name in names if fingerprints.get(name) != current.get(name)]
        what = f"{', '.join(changed)} changed"
    else:
        what = "which files changed was not recorded"
    return f"the prompt set was {version}, now {now.version} ({now.source}): {what}"


def load_templates(spec: str | Path | None = None) -> Templates:
    """None: the default set. A set name, unless a directory of that name exists: then the directory,
    whose files override the default set's (the CLI hands `--prompts kevin-tui` over as a Path)."""
    directory = Path(spec) if spec is not None and Path(spec).is_dir() else None
    name = DEFAULT_SET if spec is None or directory else str(spec)
    if name not in SETS:
        raise TemplateError(f"{spec}: neither a directory nor a template set ({', '.join(SETS)})")
    if directory is not None and (unknown := unknown_files(directory)):
        raise TemplateError(f"{directory}: {', '.join(unknown)} is no template's file; the templates are "
                            f"{', '.join(FILES)}")  # fmt: skip
    shipped = resources.files("kevin_tui.prompts") / name
    texts: dict[str, str] = {}
    for template in NAMES:
        override = directory / f"{template}.md" if directory else None
        raw = override.read_text() if override and override.exists() else (shipped / f"{template}.md").read_text()
        text = HEADER.sub("", raw, count=1)
        texts[template] = text.rstrip("\n") if template in INLINE else text
    return Templates(texts, f"{directory} (over {name})" if directory else name)


def unknown_files(directory: Path) -> list[str]:
    """Files in an override directory that no template reads (hidden files aside)."""
    return sorted(p.name for p in directory.iterdir() if p.is_file() and not p.name.startswith(".")
                  and p.name not in FILES)  # fmt: skip


def project_prompts(cwd: Path | None = None) -> Path | None:
    """The project's `./prompts/`, when there is one: used unless --prompts or the config names others."""
    directory = (cwd or Path.cwd()) / PROJECT_DIR
    return directory.resolve() if directory.is_dir() else None


def export_templates(directory: Path, name: str = DEFAULT_SET) -> tuple[list[Path], list[Path]]:
    """Write set `name`'s templates into `directory` to edit; files already there are kept, never
    overwritten. Returns (written, kept)."""
    if name not in SETS:
        raise TemplateError(f"{name}: not a template set ({', '.join(SETS)})")
    directory.mkdir(parents=True, exist_ok=True)
    shipped = resources.files("kevin_tui.prompts") / name
    written: list[Path] = []
    kept: list[Path] = []
    for file in FILES:
        path = directory / file
        if path.exists():
            kept.append(path)
        else:
            path.write_text((shipped / file).read_text())
            written.append(path)
    return written, kept

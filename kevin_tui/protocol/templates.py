"""Prompt templates: editable `.md` files with `${name}` placeholders (string.Template).

`$`-placeholders rather than `{}` because the templates are full of C++ and Python braces.
The shipped set lives in `prompts/` (installed as `kevin_tui.prompts`); `--prompts DIR` may point at
a copy with some or all files changed, and missing files fall back to the shipped ones.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template

NAMES = (
    "base", "example", "answer_format", "history_header", "attempt", "edited", "note", "refine",
    "feedback", "summary_request",
)  # fmt: skip


class TemplateError(Exception):
    pass


@dataclass(frozen=True)
class Templates:
    texts: dict[str, str]

    def render(self, name: str, **values: object) -> str:
        return Template(self.texts[name]).safe_substitute({k: str(v) for k, v in values.items()})

    def feedback(self, status: str, **values: object) -> str:
        sections = dict(re.findall(r"^## (\w+)\n(.*?)(?=^## |\Z)", self.texts["feedback"], re.M | re.S))
        if status not in sections:
            raise TemplateError(f"feedback.md has no section '## {status}'")
        return Template(sections[status].strip()).safe_substitute({k: str(v) for k, v in values.items()})

    @property
    def version(self) -> str:
        """A short hash of the templates in use, recorded in sessions."""
        joined = "\0".join(f"{k}\0{self.texts[k]}" for k in sorted(self.texts))
        return hashlib.sha256(joined.encode()).hexdigest()[:12]


def load_templates(directory: Path | None = None) -> Templates:
    shipped = resources.files("kevin_tui.prompts")
    texts: dict[str, str] = {}
    for name in NAMES:
        override = directory / f"{name}.md" if directory else None
        if override is not None and override.exists():
            text = override.read_text()
        else:
            text = (shipped / f"{name}.md").read_text()
        texts[name] = text.rstrip("\n") if name in ("edited",) else text
    return Templates(texts)

"""A module class's source made self-contained: the class, and everything it needs from your files.

Why: a problem file must stand alone. Kevin reads it (the prompt is the problem's source, so the
code of every helper must be in it), the evaluator's workers import it with only that file in their
sandbox, and it is committed beside the kernel so the verdict can be reproduced after your code
moves on. So instead of `from mypkg.blocks import GeluGate`, the problem holds GeluGate's class
and, in dependency order, each top-level function, class, constant and import it uses, followed
through `from ... import ...` (absolute or relative) into your package's files. Imports of other
packages (torch, math, einops) stay imports.

Read from the syntax tree only; the result is checked by running it (kevin_tui.usermodel.worker).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from kevin_tui.usermodel.specs import SpecError

COMPOUND = (ast.If, ast.Try, ast.With, ast.For, ast.While)


def import_root(path: Path) -> Path:
    """The directory to put on sys.path to import `path`: above the topmost package holding it."""
    directory = path.resolve().parent
    while (directory / "__init__.py").exists() and directory.parent != directory:
        directory = directory.parent
    return directory


def module_name(path: Path) -> str:
    """`mypkg.blocks` for mypkg/blocks.py inside a package; `blocks` for a plain file."""
    path = path.resolve()
    parts = [] if path.name == "__init__.py" else [path.stem]
    directory = path.parent
    while (directory / "__init__.py").exists() and directory.parent != directory:
        parts.insert(0, directory.name)
        directory = directory.parent
    return ".".join(parts)


@dataclass
class SourceFile:
    path: Path
    name: str  # its module name
    lines: list[str]
    tree: ast.Module
    bindings: dict[str, ast.stmt] = field(default_factory=dict)
    future_annotations: bool = False

    @classmethod
    def read(cls, path: Path) -> SourceFile:
        try:
            text = path.read_text()
            tree = ast.parse(text, filename=str(path))
        except SyntaxError as exc:
            raise SpecError(f"{path}: Python syntax error at line {exc.lineno}: {exc.msg}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise SpecError(f"{path}: cannot read it ({exc})") from None
        found = cls(path.resolve(), module_name(path), text.splitlines(), tree)
        for statement in tree.body:
            for name in bound_names(statement):
                found.bindings[name] = statement
            if isinstance(statement, ast.ImportFrom) and statement.module == "__future__":
                found.future_annotations |= any(a.name == "annotations" for a in statement.names)
        return found

    def segment(self, statement: ast.stmt) -> str:
        """The statement's source with its decorators and the comment lines right above it."""
        decorators = getattr(statement, "decorator_list", [])
        start = min([statement.lineno, *(d.lineno for d in decorators)]) - 1
        while start > 0 and self.lines[start - 1].lstrip().startswith("#"):
            start -= 1
        return "\n".join(self.lines[start : statement.end_lineno])

    @property
    def package(self) -> list[str]:
        parts = self.name.split(".")
        return parts if self.path.name == "__init__.py" else parts[:-1]


def bound_names(statement: ast.stmt) -> list[str]:
    """Names a top-level statement binds (compound statements: every name bound inside them)."""
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [statement.name]
    if isinstance(statement, ast.Import | ast.ImportFrom):
        return [(a.asname or a.name).split(".")[0] for a in statement.names if a.name != "*"]
    if isinstance(statement, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(statement, COMPOUND):
        return [name for child in ast.iter_child_nodes(statement) if isinstance(child, ast.stmt)
                for name in bound_names(child)]  # fmt: skip
    return []


def used_names(node: ast.AST) -> set[str]:
    """Every plain name the statement mentions (locals too: a local that shadows a top-level name only
    brings in a definition that is not needed, never misses one)."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


class Bundler:
    """Collects definitions from several files into one namespace; a name that means two things is an
    error that names both."""

    def __init__(self, search_roots: list[Path]) -> None:
        self.roots = list(dict.fromkeys(r.resolve() for r in search_roots))
        self.files: dict[Path, SourceFile] = {}
        self.meaning: dict[str, tuple[str, ...]] = {}  # bound name: what binds it
        self.import_lines: list[str] = []
        self.order: list[tuple[SourceFile, ast.stmt] | str] = []  # definitions, and `alias = name` lines
        self.future_annotations = False

    def file(self, path: Path) -> SourceFile:
        path = path.resolve()
        if path not in self.files:
            self.files[path] = SourceFile.read(path)
        return self.files[path]

    def add(self, path: Path, name: str) -> None:
        """Bring `name`, as `path` binds it, and everything it uses into the bundle."""
        source = self.file(path)
        if name not in source.bindings:
            raise SpecError(f"{path}: defines no top-level {name}")
        self._need(source, name, name)

    def need_import(self, name: str, statement: str) -> None:
        """An import the bundle needs whatever your code uses (`import torch` for get_inputs())."""
        if self._bind(name, ("package", name), statement):
            self.import_lines.append(statement)

    # -- resolving names ---------------------------------------------------------------------

    def _need(self, source: SourceFile, name: str, as_name: str) -> None:
        statement = source.bindings.get(name)
        if statement is None:
            return  # a builtin, or a local of some function
        if isinstance(statement, ast.Import):
            self._need_import(source, statement, name)
        elif isinstance(statement, ast.ImportFrom) and statement.module != "__future__":
            self._need_from(source, statement, name)
        else:
            self._emit(source, statement)
        if as_name != name:
            self._bind(as_name, ("alias", name), f"{as_name} = {name}")
            self.order.append(f"{as_name} = {name}")

    def _need_import(self, source: SourceFile, statement: ast.Import, name: str) -> None:
        for alias in statement.names:
            if (alias.asname or alias.name).split(".")[0] != name:
                continue
            if self._local_module(alias.name.split("."), 0, source) is not None:
                raise SpecError(
                    f"{source.path}:{statement.lineno}: `import {alias.name}` brings in a whole module of your "
                    f"code; kevin-tui bundles names: write `from {alias.name} import ...`"
                )
            text = f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
            meaning = ("module", alias.name) if alias.asname else ("package", name)
            if self._bind(name, meaning, text):
                self.import_lines.append(text)

    def _need_from(self, source: SourceFile, statement: ast.ImportFrom, name: str) -> None:
        alias = next(a for a in statement.names if (a.asname or a.name) == name)
        parts = statement.module.split(".") if statement.module else []
        module = self._local_module(parts, statement.level, source)
        if module is None and statement.level == 0:
            text = f"from {statement.module} import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
            if self._bind(name, ("module", f"{statement.module}.{alias.name}"), text):
                self.import_lines.append(text)
            return
        if module is None:
            raise SpecError(f"{source.path}:{statement.lineno}: cannot find the module of this relative import")
        if self._local_module([*parts, alias.name], statement.level, source) is not None:
            raise SpecError(
                f"{source.path}:{statement.lineno}: `import {alias.name}` brings in a whole module of your code; "
                f"kevin-tui bundles names: import the names you use from it"
            )
        target = self.file(module)
        if alias.name not in target.bindings:
            raise SpecError(f"{source.path}:{statement.lineno}: {target.path.name} defines no {alias.name}")
        self._need(target, alias.name, name)

    def _local_module(self, parts: list[str], level: int, source: SourceFile) -> Path | None:
        """The file of a module of your code (under the search roots), or None for another package's."""
        if level:
            roots = [source.path.parent]
            for _ in range(level - 1):
                roots = [roots[0].parent]
        else:
            roots = self.roots
        for root in roots:
            candidate = root.joinpath(*parts)
            for path in (candidate.with_suffix(".py"), candidate / "__init__.py") if parts else (root / "__init__.py",):
                if path.is_file():
                    return path
        return None

    # -- emitting ----------------------------------------------------------------------------

    def _bind(self, name: str, meaning: tuple[str, ...], what: str) -> bool:
        """Record what `name` means; False when it already means that, an error when something else."""
        known = self.meaning.get(name)
        if known is None:
            self.meaning[name] = (*meaning, what)
            return True
        if known[:-1] == meaning:
            return meaning[0] == "package" and what not in self.import_lines  # `import a` and `import a.b`
        raise SpecError(f"cannot bundle: `{name}` means two things here ({known[-1]} and {what}); rename one")

    def _emit(self, source: SourceFile, statement: ast.stmt) -> None:
        where = f"{source.path.name}:{statement.lineno}"
        names = bound_names(statement)
        if names and self.meaning.get(names[0], ())[:2] == ("definition", where):
            return  # already in
        for bound in names:
            self._bind(bound, ("definition", where), where)
        self.future_annotations |= source.future_annotations
        for used in sorted(used_names(statement)):
            if used in source.bindings and source.bindings[used] is not statement:
                self._need(source, used, used)
        self.order.append((source, statement))

    def text(self, relative_to: Path) -> str:
        """The bundle as source: imports, then the definitions under comments naming their files."""
        head = ["from __future__ import annotations", ""] if self.future_annotations else []
        blocks, last = [], None
        for item in self.order:
            if isinstance(item, str):
                blocks.append(item)
                continue
            source, statement = item
            code = source.segment(statement)
            if source.path != last:
                code = f"# from {relative_path(source.path, relative_to)}\n{code}"
                last = source.path
            blocks.append(code)
        imports = sorted(self.import_lines, key=lambda line: (line.startswith("from "), line))
        return "\n".join([*head, *imports, "", "", "\n\n\n".join(blocks)]) + "\n"


def relative_path(path: Path, root: Path) -> str:
    """`path` relative to `root` when it is inside it (as written in problem files), else absolute."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path.resolve())

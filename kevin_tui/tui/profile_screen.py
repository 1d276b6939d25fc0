"""The profile screen: where your model's time goes, and the parts you pick written as problems.

`kevin-tui profile` in a terminal opens it. The profile runs in a thread (the worker process does the
work), so the screen answers at once; then your modules fill one table (ranked by self time, with
their share and the most the model could gain) and torch's operators another. Space picks module
rows, x writes their problem files (the row under the cursor when none is picked); what was
written is printed again on quit, with the `kevin-tui optimize` command for each.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label, Static

from kevin_tui.errors import KevinError
from kevin_tui.usermodel.profile_report import (
    MODULE_COLUMNS,
    OPERATOR_COLUMNS,
    RIGHT,
    ModuleRow,
    ProfileReport,
    extract,
    module_cells,
    operator_cells,
    profile,
)
from kevin_tui.usermodel.specs import ModelSpec

PICKED = "✓"


class ProfileScreen(Screen):
    DEFAULT_CSS = """
    ProfileScreen { layout: vertical; }
    #profile-summary { padding: 0 1; color: $text-muted; }
    #modules { height: 2fr; }
    #operators { height: 1fr; border-top: solid $primary-darken-2; }
    .caption { padding: 0 1; text-style: bold; }
    """
    BINDINGS = [
        Binding("space", "pick", "Pick"),
        Binding("x", "extract", "Extract as problems"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, spec: ModelSpec, device: str, calls: int, problems_dir: Path) -> None:
        super().__init__()
        self.spec, self.device, self.calls, self.problems_dir = spec, device, calls, problems_dir
        self.report: ProfileReport | None = None
        self.picked: set[int] = set()
        self.said: list[str] = []

    def compose(self) -> ComposeResult:
        yield Static(f"profiling {self.spec.describe()} on {self.device}…", id="profile-summary")
        yield Label("Your modules, by self time", classes="caption")
        yield DataTable(id="modules", cursor_type="row", zebra_stripes=True)
        yield Label("Operators, by self time", classes="caption")
        yield DataTable(id="operators", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#modules", DataTable).add_columns(" ", *MODULE_COLUMNS)
        self.query_one("#operators", DataTable).add_columns(*OPERATOR_COLUMNS)
        self.run_profile()

    @work(thread=True, exit_on_error=False)
    def run_profile(self) -> None:
        try:
            report = profile(self.spec, self.device, self.calls, self.problems_dir)
        except KevinError as exc:
            self.app.call_from_thread(self.failed, str(exc))
            return
        self.app.call_from_thread(self.show, report)

    def failed(self, message: str) -> None:
        self.query_one("#profile-summary", Static).update(f"profile failed: {message}")
        self.notify(message, severity="error", timeout=30)

    def show(self, report: ProfileReport) -> None:
        self.report = report
        self.query_one("#profile-summary", Static).update(report.summary())
        modules = self.query_one("#modules", DataTable)
        for row in report.modules:
            modules.add_row("", *_justified(MODULE_COLUMNS, module_cells(row)), key=str(row.rank))
        operators = self.query_one("#operators", DataTable)
        for operator in report.operators:
            operators.add_row(*_justified(OPERATOR_COLUMNS, operator_cells(operator)))
        modules.focus()

    def _under_cursor(self) -> ModuleRow | None:
        if self.report is None or not self.report.modules:
            return None
        return self.report.modules[self.query_one("#modules", DataTable).cursor_row]

    def action_pick(self) -> None:
        row = self._under_cursor()
        if row is None:
            return
        self.picked ^= {row.rank}
        table = self.query_one("#modules", DataTable)
        table.update_cell(str(row.rank), table.ordered_columns[0].key, PICKED if row.rank in self.picked else "")

    def action_extract(self) -> None:
        if self.report is None:
            self.notify("the profile is still running", severity="warning")
            return
        rows: list[ModuleRow | None] = [r for r in self.report.modules if r.rank in self.picked]
        rows = rows or [self._under_cursor()]
        lines = extract([r for r in rows if r is not None], self.problems_dir)
        self.said += lines
        self.notify("\n".join(lines), timeout=15)


def _justified(columns: tuple[str, ...], cells: list[str]) -> list[Text]:
    return [
        Text(cell, justify="right" if column in RIGHT else "left") for column, cell in zip(columns, cells, strict=True)
    ]


class ProfileApp(App):
    """`kevin-tui profile` in a terminal: the profile screen, alone."""

    TITLE = "kevin-tui profile"

    def __init__(self, spec: ModelSpec, device: str, calls: int, problems_dir: Path) -> None:
        super().__init__()
        self.screen_args = (spec, device, calls, problems_dir)
        self.said: list[str] = []

    def on_mount(self) -> None:
        screen = ProfileScreen(*self.screen_args)
        self.push_screen(screen)
        self.said = screen.said  # the lines of what was extracted, printed again on exit

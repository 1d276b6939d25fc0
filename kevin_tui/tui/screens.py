"""Modal screens: a note for the next turn, the inline kernel editor, a yes/no question."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static, TextArea


class NoteScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="note-dialog", classes="dialog"):
            yield Label("A note for Kevin's next turn (Enter to send, Esc to cancel):")
            yield Input(placeholder="e.g. try shared-memory tiling", id="note-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)


class EditScreen(ModalScreen[str | None]):
    """The inline editor for a kernel; Ctrl+S evaluates the edited version, Esc drops it."""

    BINDINGS = [Binding("ctrl+s", "save", "Evaluate edit", priority=True), Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, code: str) -> None:
        super().__init__()
        self.code = code

    def compose(self) -> ComposeResult:
        with Vertical(id="edit-dialog", classes="dialog"):
            yield Label("Edit the kernel. Ctrl+S evaluates it as your attempt; Esc cancels.")
            yield TextArea(self.code, id="editor", show_line_numbers=True, tab_behavior="indent")

    def action_save(self) -> None:
        self.dismiss(self.query_one(TextArea).text)


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question; the whole question wraps inside the dialog, however long."""

    BINDINGS = [Binding("y", "dismiss(True)", "Yes"), Binding("n,escape", "dismiss(False)", "No")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.question, id="question", markup=False)
            yield Label("[b]y[/b] yes   [b]n[/b] no")

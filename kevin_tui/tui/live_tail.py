"""The end of a reply while it streams.

Its size is fixed by the layout, and it wraps only as much of the reply's end as could fit, keeping
the last lines, bottom-aligned: an update costs the same however long the reply grows, never asks
for a new layout, and repaints only this widget (line API: the lines are rendered once, here).
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip
from textual.widget import Widget

DIM = Style(dim=True)


class LiveTail(Widget):
    DEFAULT_CSS = """
    LiveTail {
        height: 1fr;
        padding: 0 1;
        display: none;  /* until a reply streams */
    }
    """

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self.strips: list[Strip] = []

    def show(self, reasoning: str, answer: str) -> None:
        width, height = self.content_size
        if width <= 0 or height <= 0:
            return
        room = width * height  # no more characters than could be on screen
        text = Text(reasoning[-room:], style=DIM)
        if answer:
            text.append("\n\n" + answer[-room:])
        console = self.app.console
        lines = console.render_lines(text, console.options.update(width=width, height=None), pad=False)
        self.strips = [Strip(line, Segment.get_line_length(line)) for line in lines[-height:]]
        self.refresh()

    def clear(self) -> None:
        self.strips = []
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.content_size.width
        if y < len(self.strips):
            return self.strips[y].extend_cell_length(width).crop(0, width)
        return Strip.blank(width)

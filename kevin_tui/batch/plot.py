"""The curve of the best speedup by turn as a PNG, with matplotlib (the optional extra
`kevin-tui[plot]`: a report needs it only for this picture, so a server install can do without)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from kevin_tui.batch.report import RunReport

MISSING = "matplotlib is not installed: no PNG plot (pip install 'kevin-tui[plot]'); the tables are written"


def plot_curves(reports: Sequence[RunReport], path: Path) -> Path | None:
    """best@k and avg@k by turn for each run; None (and nothing written) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, never a window
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figure = curve_figure(reports)
    figure.savefig(path)
    plt.close(figure)
    return path


def curve_figure(reports: Sequence[RunReport]) -> Figure:
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    figure, axes = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    for report in reports:
        turns = range(1, len(report.curve["best"]) + 1)
        name = f"{report.outcome.name} " if len(reports) > 1 else ""
        line = axes.plot(turns, report.curve["best"], marker="o", label=f"{name}best@{report.k}")[0]
        axes.plot(turns, report.curve["avg"], marker=".", linestyle="--", color=line.get_color(),
                  label=f"{name}avg@{report.k}")  # fmt: skip
    axes.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))  # turns are whole: no turn 1.5 on the axis
    axes.set_xlabel("turn")
    axes.set_ylabel("best speedup so far vs eager (mean over problems)")
    axes.set_title("Best speedup by turn")
    axes.legend()
    figure.tight_layout()
    return figure

"""A rich progress bar for sample loops: samples done, samples/s, time left."""
from __future__ import annotations

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, \
    TimeRemainingColumn
from rich.text import Text


class RateColumn(ProgressColumn):
    def render(self, task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("-- samples/s" if speed is None else f"{speed:.1f} samples/s")


def sample_bar(console, title: str) -> Progress:
    return Progress(TextColumn(escape(title)), BarColumn(), MofNCompleteColumn(), TextColumn("samples"),
                    RateColumn(), TimeRemainingColumn(), console=console, transient=True)

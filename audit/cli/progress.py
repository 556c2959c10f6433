"""The progress bar of long commands: rich, on stderr, only on a terminal."""

from __future__ import annotations

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from audit.cli.app import err


class _Rate(ProgressColumn):
    """Inputs per second, as 12.3M inputs/s."""

    def render(self, task):
        v = task.speed
        if not v:
            return Text("", style="progress.data.speed")
        for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3), ("", 1)):
            if v >= div:
                return Text(f"{v / div:.1f}{unit} inputs/s", style="progress.data.speed")
        return Text(f"{v:.1f} inputs/s", style="progress.data.speed")


class ProgressBar:
    """A rich progress bar on stderr (only on a terminal): one line per result, with its
    inputs done of its total, rate and time remaining; a resumed run starts where its
    checkpoint stopped.  Each step is also where a signal that a library swallowed is
    raised again (:func:`audit.signals.check`)."""

    def __enter__(self):
        self.p = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            _Rate(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=err,
            transient=True,
            disable=not err.is_terminal,
        )
        self.p.__enter__()
        self.task = self.p.add_task("sweeping", total=None)
        return self

    def start(self, label: str, total: int) -> None:
        """A new result begins: its own line (the previous one is done)."""
        from audit.signals import check, ready

        check()
        ready("sweep")
        self.p.update(self.task, visible=False)
        self.label, self.total = label, total
        self.task = self.p.add_task(label, total=total)

    def resumed(self, n: int) -> None:
        """n inputs were done before: counted, not taken for speed (a fresh task)."""
        self.p.remove_task(self.task)
        self.task = self.p.add_task(f"{self.label} (resumed)", total=self.total, completed=n)

    def __call__(self, n: int) -> None:
        from audit.signals import check, ready

        check()
        ready("chunk")
        self.p.advance(self.task, n)

    def __exit__(self, *exc):
        return self.p.__exit__(*exc)

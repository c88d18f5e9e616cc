"""Every command says when it compiles CPU kernels, while it does, and what it cost.

A new model's first run can compile for a minute or more (numba, once per machine and kernel
signature; mace/ops/fast/kernel_cache.py). Unannounced, that looks like a hang. On the first
compile this prints one line (stderr) naming `converter.py warmup`; on a terminal a spinner then
counts the kernels as they compile; at the end one line says how many compiled and how long it took.
"""
from __future__ import annotations

import contextlib
import sys
import time

from rich.console import Console

from mace.ops.fast import kernel_cache


class _Notice:
    def __init__(self, console: Console):
        self.console = console
        self.tally = kernel_cache.Tally()
        self.status = None
        self.t0 = None

    def started(self, name: str, chain: bool = False) -> None:
        self.tally.started(name, chain)
        if self.t0 is None:
            self.t0 = time.perf_counter()
            # a model's chain of steps is nothing warmup compiles ahead (the listener tells it apart)
            note = kernel_cache.CHAIN_NOTE if chain else kernel_cache.FIRST_NOTE
            self.console.print(f"note: {note}", markup=False, highlight=False)
            if self.console.is_terminal:
                with contextlib.suppress(Exception):   # another live display holds the terminal
                    self.status = self.console.status("")
                    self.status.start()
        self._show(name)

    def finished(self) -> None:
        self.tally.finished()
        self._show(self.tally.current)

    def _show(self, name: str) -> None:
        if self.status is not None:
            self.status.update(f"compiling CPU kernels: {self.tally.compiled} done, now {name} "
                               f"({time.perf_counter() - self.t0:.0f} s)")

    def close(self) -> None:
        if self.status is not None:
            self.status.stop()
        served = kernel_cache.served_ahead()   # MACE_AOT=1: whether numba was needed after all
        if served:
            self.console.print(f"note: {served}", markup=False, highlight=False)
        if self.tally.compiled:
            self.console.print(f"note: compiled {self.tally.compiled} CPU kernel(s) for this machine in "
                               f"{time.perf_counter() - self.t0:.1f} s; later runs load them from the cache",
                               markup=False, highlight=False)


@contextlib.contextmanager
def compile_notice(console: Console | None = None):
    """Announce (and tally) the kernel compiles that happen inside the block."""
    notice = _Notice(console or Console(file=sys.stderr, highlight=False, soft_wrap=True))
    try:
        with kernel_cache.watch(notice):
            yield notice
    finally:
        notice.close()

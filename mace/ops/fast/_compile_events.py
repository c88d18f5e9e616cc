"""numba's compile events, as our own: who is told when a kernel starts and ends compiling.

Registered with numba when the loops are imported (mace/ops/fast/_jit.py), so nothing here
imports numba by itself. Observers (the CLI's progress line, `warmup`'s tally) come and go with
`watch`; with none, the first compile of the process is logged once, so a library user's first
run is not silent either.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass

log = logging.getLogger("mace.jit")

WARMUP_HINT = "python tools/converter.py warmup"
CHAIN_MODULES = "mace_chain_"   # the generated chains' module names (mace/ops/fast/chain.py)
FIRST_NOTE = ("compiling CPU kernels for this machine (first use; they are cached for later runs, "
              f"and `{WARMUP_HINT}` compiles all of them ahead) ...")
CHAIN_NOTE = ("compiling this model's steps into one call (first time on this machine, up to a few "
              "seconds; cached for later runs) ...")


class _Listener:
    """numba's compile events, top level only (a loop compiles the loops it calls inside its
    own event), handed to the observers registered at the time."""

    def __init__(self):
        self.depth = threading.local()
        self.announced = False
        self.chain_announced = False

    def on_start(self, event) -> None:
        depth = getattr(self.depth, "n", 0)
        self.depth.n = depth + 1
        if depth == 0:
            dispatcher = event.data.get("dispatcher")
            name = getattr(dispatcher, "__name__", "kernel")
            # a chain of a model's steps (mace/ops/fast/chain.py, after its 16th run: a parallel
            # one compiles for 1-3 s) is nothing warmup compiles ahead: told apart here, once
            chain = (getattr(getattr(dispatcher, "py_func", None), "__module__", None) or "").startswith(CHAIN_MODULES)
            for o in list(_OBSERVERS):
                o.started(name, chain)
            # a library user: say it once, by logging; a chain says so once with its own note,
            # without the warmup hint (no warmup could have compiled it)
            if not _OBSERVERS and chain and not self.chain_announced:
                self.chain_announced = True
                log.warning("note: " + CHAIN_NOTE)
            elif not _OBSERVERS and not self.announced and not chain:
                self.announced = True
                log.warning("note: " + FIRST_NOTE)

    def on_end(self, event) -> None:
        self.depth.n = getattr(self.depth, "n", 1) - 1
        if self.depth.n == 0:
            for o in list(_OBSERVERS):
                o.finished()


_LISTENER = None
_OBSERVERS = []   # watch()'s observers; numba need not be imported to register one


def listener() -> _Listener | None:
    """Our compile listener, registered with numba the first time it is asked for (None
    without numba)."""
    global _LISTENER
    if _LISTENER is None:
        try:
            from numba.core import event
        except ImportError:
            return None
        ours = _Listener()

        class Forward(event.Listener):   # numba's listener interface, forwarding to ours
            def on_start(self, ev):
                ours.on_start(ev)

            def on_end(self, ev):
                ours.on_end(ev)

        event.register("numba:compile", Forward())
        _LISTENER = ours
    return _LISTENER


@contextlib.contextmanager
def watch(observer):
    """Within the block, `observer.started(kernel name, chain)` (chain: a model's chain of steps,
    not a kernel warmup compiles) and `observer.finished()` are called
    around each top-level compile (from any thread). numba is not imported for this: the
    listener is registered when the loops are (mace/ops/fast/_jit.py)."""
    _OBSERVERS.append(observer)
    try:
        yield
    finally:
        _OBSERVERS.remove(observer)


@dataclass
class Tally:
    """What a watched block compiled: how many top-level compiles, seconds spent."""
    compiled: int = 0
    seconds: float = 0.0
    _t0: float = 0.0
    current: str = ""

    def started(self, name: str, chain: bool = False) -> None:
        self._t0, self.current = time.perf_counter(), name

    def finished(self) -> None:
        self.compiled += 1
        self.seconds += time.perf_counter() - self._t0

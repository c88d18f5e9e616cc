"""One bound op of a loaded model: what the engine (and the GPU runtime's staged ops) run."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Node:
    index: int
    op: object          # the OperatorDef
    kernel: object
    tag: str            # which kernel variant runs it
    inputs: list = field(default_factory=list)   # ndarrays (consts or arena views)
    outputs: list = field(default_factory=list)  # ndarrays (arena views)
    # ((tag, reason), ...): the kernels before `tag` whose check declined this node
    declined: tuple = ()

    @property
    def kernel_name(self) -> str:
        """The tag, and the algorithm where the kernel picks one at load (`cpu:fast/im2col-packed`):
        what the profiler and benchmark's per-op table show."""
        algorithm = getattr(self.kernel, "algorithm_name", None)
        return f"{self.tag}/{algorithm}" if isinstance(algorithm, str) and algorithm else self.tag

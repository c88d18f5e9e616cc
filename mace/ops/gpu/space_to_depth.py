"""SpaceToDepth on the GPU."""
from __future__ import annotations

from mace.ops.gpu._tensor import SpaceDepthGpu
from mace.ops.registry import kernel


@kernel("SpaceToDepth", "gpu")
class SpaceToDepthGpu(SpaceDepthGpu):
    to_space = 0

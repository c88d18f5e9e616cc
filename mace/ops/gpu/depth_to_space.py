"""DepthToSpace on the GPU (DCR and CRD modes)."""
from __future__ import annotations

from mace.ops.gpu._tensor import SpaceDepthGpu
from mace.ops.registry import kernel


@kernel("DepthToSpace", "gpu")
class DepthToSpaceGpu(SpaceDepthGpu):
    to_space = 1

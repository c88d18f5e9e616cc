"""GPU tensors and their 2-D images: shapes per layout, and image reuse.

Every activation is stored channel-major (MACE's default): a tensor of rank <= 4 is
viewed as NHWC (rank 2 (N, C) -> (N, 1, 1, C), rank 3 (A, B, C) -> (A, 1, B, C),
rank 1 (C) -> (1, 1, 1, C)), which keeps its row-major element order, and that
view is stored in an image [W * (C+3)/4, N * H]. Kernels index by logical sizes,
so an image may be larger than its tensor: images are reused between tensors
whose lifetimes do not overlap (`plan_images`, MACE's greedy block reuse over the
lifetimes the CPU memory planner uses), growing a block where that is cheapest.
"""
from __future__ import annotations

from dataclasses import dataclass, field


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def as_nhwc(shape) -> tuple:
    """The NHWC view of a rank <= 4 shape (row-major order kept)."""
    shape = tuple(int(d) for d in shape)
    if len(shape) == 4:
        return shape
    if len(shape) == 3:
        return (shape[0], 1, shape[1], shape[2])
    if len(shape) == 2:
        return (shape[0], 1, 1, shape[1])
    if len(shape) == 1:
        return (1, 1, 1, shape[0])
    if len(shape) == 0:
        return (1, 1, 1, 1)
    raise ValueError(f"rank {len(shape)} tensors have no image layout")


# Image [width, height] of each layout (docs/gpu.md); shapes as the buffer holds them.
def channel_major_size(nhwc) -> tuple:
    n, h, w, c = nhwc
    return (w * cdiv(c, 4), n * h)


def height_major_size(nhwc) -> tuple:
    n, h, w, c = nhwc
    return (w * c, n * cdiv(h, 4))


def conv_filter_size(oihw) -> tuple:
    o, i, h, w = oihw
    return (i, cdiv(o, 4) * h * w)


def dw_filter_size(mihw) -> tuple:
    m, i, h, w = mihw
    return (h * w * m, cdiv(i, 4))


def arg_size(length: int) -> tuple:
    return (cdiv(length, 4), 1)


@dataclass
class GpuTensor:
    """A tensor living on the GPU: its logical shape and the image holding it."""

    name: str
    shape: tuple
    image: object = None
    block: int = -1        # which planned image it uses

    @property
    def nhwc(self) -> tuple:
        return as_nhwc(self.shape)

    @property
    def image_size(self) -> tuple:
        return channel_major_size(self.nhwc)


@dataclass
class ImageLife:
    name: str
    size: tuple   # (width, height) in pixels
    first: int
    last: int


@dataclass
class ImagePlan:
    blocks: list = field(default_factory=list)    # [width, height] per image
    assignment: dict = field(default_factory=dict)  # tensor -> block index
    tensor_pixels: int = 0                         # what one image per tensor would take

    @property
    def pixels(self) -> int:
        return sum(w * h for w, h in self.blocks)


def plan_images(lives: list) -> ImagePlan:
    """Assign each tensor an image block; a block is free once its last tensor's last use passed."""
    plan = ImagePlan()
    busy_until = []
    for life in sorted(lives, key=lambda t: (t.first, -t.size[0] * t.size[1], t.name)):
        w, h = life.size
        plan.tensor_pixels += w * h
        free = [b for b, last in enumerate(busy_until) if last < life.first]
        block = _pick(plan.blocks, free, w, h)
        if block is None:
            plan.blocks.append([w, h])
            busy_until.append(life.last)
            block = len(plan.blocks) - 1
        else:
            bw, bh = plan.blocks[block]
            plan.blocks[block] = [max(bw, w), max(bh, h)]
            busy_until[block] = life.last
        plan.assignment[life.name] = block
    return plan


def _pick(blocks, free, w, h):
    """A free block that already fits (smallest), else the one that grows least, else None."""
    fitting = [b for b in free if blocks[b][0] >= w and blocks[b][1] >= h]
    if fitting:
        return min(fitting, key=lambda b: blocks[b][0] * blocks[b][1])
    if not free:
        return None

    def growth(b):
        bw, bh = blocks[b]
        return max(bw, w) * max(bh, h) - bw * bh

    best = min(free, key=growth)
    # Growing costs more than a fresh image: start a new one.
    return best if growth(best) < w * h else None

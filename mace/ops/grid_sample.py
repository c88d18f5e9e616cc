"""GridSample: sample `x` at the normalised coordinates of `grid` (ONNX GridSample; spatial
transformer networks, optical-flow warps).

Inputs: x (N, C, *spatial), grid (N, *out_spatial, D) with D = len(spatial), the last axis
giving coordinates in [-1, 1] from the innermost spatial axis out (x, y, ...). Args: mode
(linear | nearest | cubic; cubic only for 2-D), padding_mode (zeros | border | reflection),
align_corners (-1 and 1 are the corner pixels' centres, else their outer edges). For linear and
nearest, coordinates outside the image are first clamped (border) or reflected (reflection);
then every tap outside reads 0 (zeros), the edge (border) or its mirror (reflection). Nearest rounds half to even.
Output (N, C, *out_spatial). Layout ANY.
"""
import numpy as np

from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op

MODES = {"bilinear": "linear", "linear": "linear", "nearest": "nearest", "bicubic": "cubic", "cubic": "cubic"}


@register_op("GridSample", layout=Layout.ANY)
class GridSample(OpSpec):
    attrs = {"align_corners": 0, "mode": "linear", "padding_mode": "zeros"}

    @staticmethod
    def infer(ctx):
        x, grid = tuple(ctx.shapes[0]), tuple(ctx.shapes[1])
        if len(x) < 3 or len(grid) != len(x) or grid[-1] != len(x) - 2 or grid[0] != x[0]:
            raise ValueError(f"GridSample '{ctx.op.name}': grid {list(grid)} does not fit input {list(x)}")
        if ctx.arg("mode") == "cubic" and len(x) != 4:
            raise ValueError(f"GridSample '{ctx.op.name}': cubic sampling is defined for 4-D inputs only")
        return [((x[0], x[1]) + grid[1:-1], ctx.dtypes[0])]


def _reflect(v, lo, hi):
    """Fold coordinates into [lo, hi] by mirroring at the borders, as often as it takes."""
    span = hi - lo
    if span <= 0:
        return np.full_like(v, lo)
    below, above = v < lo, v > hi
    dist = np.where(below, lo - v, v - hi)
    folds = np.floor(dist / span)
    rest = dist - folds * span
    even = folds % 2 == 0
    inside_from_low = np.where(even, lo + rest, hi - rest)
    inside_from_high = np.where(even, hi - rest, lo + rest)
    return np.where(below, inside_from_low, np.where(above, inside_from_high, v)).astype(v.dtype)


def _keys(t):
    """Cubic convolution weights (a = -0.75) of the four taps around fraction t."""
    a = -0.75
    w = lambda s: np.where(s <= 1, ((a + 2) * s - (a + 3)) * s * s + 1,  # noqa: E731
                           ((a * s - 5 * a) * s + 8 * a) * s - 4 * a)
    return [w(t + 1), w(t), w(1 - t), w(2 - t)]


class _Axis:
    """One spatial axis: its size and how taps outside it are read."""

    def __init__(self, size, align, padding):
        self.size, self.padding = size, padding
        self.lo, self.hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)

    def coords(self, g, align):
        x = (g + 1) / 2 * (self.size - 1) if align else ((g + 1) * self.size - 1) / 2
        return x.astype(np.float32)

    def fold(self, x):
        """Clamp or reflect coordinates outside the borders (zeros keeps them)."""
        out = (x < self.lo) | (x > self.hi)
        if self.padding == "border":
            return np.where(out, np.clip(x, 0, self.size - 1), x)
        if self.padding == "reflection":
            return np.where(out, _reflect(x, np.float32(self.lo), np.float32(self.hi)), x)
        return x

    def tap(self, i):
        """(index to read, whether it counts) for integer tap positions i."""
        if self.padding == "zeros":
            ok = (i >= 0) & (i < self.size)
            return np.clip(i, 0, self.size - 1), ok
        if self.padding == "border":
            return np.clip(i, 0, self.size - 1), np.ones(i.shape, bool)
        mirrored = np.trunc(_reflect(i.astype(np.float64), self.lo, self.hi)).astype(np.int64)
        return np.clip(mirrored, 0, self.size - 1), np.ones(i.shape, bool)


def grid_sample(x, grid, mode, padding, align):
    n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
    dims = len(spatial)
    axes = [_Axis(s, align, padding) for s in spatial]
    out_spatial = grid.shape[1:-1]
    g = grid.reshape(n, -1, dims)[..., ::-1].astype(np.float32)     # (n, points, dims), outer first
    coords = [ax.coords(g[..., d], align) for d, ax in enumerate(axes)]
    if mode == "nearest":
        coords = [np.rint(v) for v in coords]
    if mode != "cubic":  # cubic folds each of its taps instead (PyTorch's and onnxruntime's rule)
        coords = [ax.fold(v) for ax, v in zip(axes, coords)]
    if mode == "nearest":
        taps = [[(np.zeros_like(v), v.astype(np.int64))] for v in coords]
    else:
        taps = []
        for v in coords:
            base = np.floor(v)
            t = v - base
            weights = [1 - t, t] if mode == "linear" else _keys(t)
            start = -1 if mode == "cubic" else 0
            taps.append([(w, base.astype(np.int64) + start + k) for k, w in enumerate(weights)])
    batch = np.arange(n)[:, None]
    out = np.zeros((n, c, g.shape[1]), np.float32)
    for combo in np.ndindex(*[len(t) for t in taps]):
        weight = np.ones(g.shape[:2], np.float32) if mode != "nearest" else None
        index, valid = [], np.ones(g.shape[:2], bool)
        for d, k in enumerate(combo):
            w, i = taps[d][k]
            if weight is not None:
                weight = weight * w
            j, ok = axes[d].tap(i)
            index.append(j)
            valid &= ok
        values = _gather(x, batch, index)
        factor = valid if weight is None else np.where(valid, weight, 0)
        out += values * factor[:, None, :]
    return out.reshape((n, c) + tuple(out_spatial))


def _gather(x, batch, index):
    """x[b, :, index...] for every point: (n, c, points)."""
    picked = x.transpose([0] + list(range(2, x.ndim)) + [1])[(batch,) + tuple(index)]  # (n, points, c)
    return picked.transpose(0, 2, 1)


@kernel("GridSample", "cpu")
class GridSampleCpu(Kernel):
    def setup(self, ctx):
        self.mode = MODES[ctx.arg("mode")]
        self.padding = ctx.arg("padding_mode")
        self.align = bool(ctx.arg("align_corners"))

    def run(self, inputs, outputs):
        y = grid_sample(inputs[0].astype(np.float32, copy=False), inputs[1], self.mode, self.padding, self.align)
        np.copyto(outputs[0], y, casting="unsafe")

"""GatherND: slices of `data` addressed by the last axis of `indices` (ONNX GatherND).

Inputs: data (rank r), indices (rank q; its last dim m <= r - batch_dims indexes the leading
axes after the batch ones). Arg batch_dims (0). Output shape:
indices.shape[:-1] + data.shape[batch_dims + m:]. Layout ANY.
"""
import numpy as np

from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


def _check(data, idx, b, name):
    m = idx[-1] if idx else 0
    if not idx or b + m > len(data) or tuple(idx[:b]) != tuple(data[:b]):
        raise ValueError(f"GatherND '{name}': indices {list(idx)} do not address data {list(data)} "
                         f"with batch_dims {b}")
    return m


@register_op("GatherND", layout=Layout.ANY)
class GatherND(OpSpec):
    attrs = {"batch_dims": 0}

    @staticmethod
    def infer(ctx):
        data, idx = tuple(ctx.shapes[0]), tuple(ctx.shapes[1])
        b = int(ctx.arg("batch_dims"))
        m = _check(data, idx, b, ctx.op.name)
        return [(idx[:-1] + data[b + m:], ctx.dtypes[0])]


def gather_nd(data, indices, b):
    m = indices.shape[-1]
    dims = np.asarray(data.shape[b:b + m])
    idx = np.where(indices < 0, indices + dims, indices).astype(np.int64)
    if idx.size and ((idx < 0).any() or (idx >= dims).any()):
        raise ValueError("GatherND: indices out of range")
    batch = int(np.prod(data.shape[:b], dtype=np.int64))
    flat_data = data.reshape((batch,) + data.shape[b:])
    flat_idx = idx.reshape(batch, -1, m)
    rows = np.arange(batch)[:, None]
    picked = flat_data[(rows,) + tuple(flat_idx[..., j] for j in range(m))]
    return picked.reshape(indices.shape[:-1] + data.shape[b + m:])


@kernel("GatherND", "cpu")
class GatherNDCpu(Kernel):
    def setup(self, ctx):
        self.b = int(ctx.arg("batch_dims"))

    def run(self, inputs, outputs):
        np.copyto(outputs[0], gather_nd(inputs[0], np.asarray(inputs[1]), self.b))

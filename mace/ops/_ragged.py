"""Helpers of the ops whose output length depends on the data (`OpSpec.ragged`): the output is
planned at its static upper bound, the kernel writes the rows it has and zeros after them (an
index 0 is valid wherever the output is used to index), and its length tensor says how many
there are; the engine hands model outputs back cut to that length (mace/runtime/engine.py)."""
import numpy as np


def write_ragged(out: np.ndarray, rows: np.ndarray, axis: int, length: np.ndarray) -> None:
    """`rows` (out's shape but `n` long on `axis`) into `out`, zeros after; n into `length`."""
    n = rows.shape[axis]
    out.fill(0)
    index = [slice(None)] * out.ndim
    index[axis] = slice(0, n)
    out[tuple(index)] = rows
    length[...] = n

"""Sparse constants (TFLite's SparsityParameters) expanded to dense arrays at convert.

A sparse tensor's buffer holds only its stored values, in `traversal_order` over
the tensor's dimensions followed by its block dimensions (`block_map` names the
dimension each block dimension splits). Each level is DENSE (every index up to
`dense_size`) or SPARSE_CSR (`array_segments` bound each parent's run of
`array_indices`). This walks the levels as TFLite's format converter defines
them and scatters the values; a DENSIFY op of such a constant then folds away.
"""
from __future__ import annotations

import numpy as np

DENSE, SPARSE_CSR = 0, 1


def _index_vector(tflite, kind: int, table):
    """The int vector of a SparseIndexVector union member."""
    names = {1: "Int32Vector", 2: "Uint16Vector", 3: "Uint8Vector"}
    if table is None or kind not in names:
        return np.zeros(0, np.int64)
    vec = getattr(tflite, names[kind])()
    vec.Init(table.Bytes, table.Pos)
    return vec.ValuesAsNumpy().astype(np.int64) if vec.ValuesLength() else np.zeros(0, np.int64)


def read_levels(tflite, sparsity) -> tuple:
    """(traversal_order, block_map, [(format, dense_size, segments, indices)] per level)."""
    order = [int(v) for v in sparsity.TraversalOrderAsNumpy()] if sparsity.TraversalOrderLength() else []
    block_map = [int(v) for v in sparsity.BlockMapAsNumpy()] if sparsity.BlockMapLength() else []
    levels = []
    for i in range(sparsity.DimMetadataLength()):
        m = sparsity.DimMetadata(i)
        levels.append((int(m.Format()), int(m.DenseSize()),
                       _index_vector(tflite, m.ArraySegmentsType(), m.ArraySegments()),
                       _index_vector(tflite, m.ArrayIndicesType(), m.ArrayIndices())))
    return order, block_map, levels


def densify(values: np.ndarray, shape: tuple, order: list, block_map: list, levels: list) -> np.ndarray:
    rank, depth = len(shape), len(order)
    if len(levels) != depth or depth != rank + len(block_map):
        raise ValueError(f"sparsity of {len(levels)} levels does not fit shape {list(shape)} with "
                         f"{len(block_map)} block dimension(s)")
    block_size = {rank + i: levels[order.index(rank + i)][1] for i in range(len(block_map))}
    out = np.zeros(shape, values.dtype)
    coord = [0] * depth          # one coordinate per expanded dimension
    stored = iter(values.reshape(-1))   # values are stored in the walk's order

    def walk(level, parent):
        fmt, size, segments, indices = levels[level]
        if fmt == DENSE:
            children = ((i, parent * size + i) for i in range(size))
        else:
            children = ((int(indices[k]), k) for k in range(segments[parent], segments[parent + 1]))
        for i, pos in children:
            coord[order[level]] = i
            if level + 1 < depth:
                walk(level + 1, pos)
            else:
                out[_original(coord, rank, block_map, block_size)] = next(stored)

    walk(0, 0)
    return out


def _original(coord, rank, block_map, block_size) -> tuple:
    c = list(coord[:rank])
    for i, d in enumerate(block_map):
        c[d] = c[d] * block_size[rank + i] + coord[rank + i]
    return tuple(c)

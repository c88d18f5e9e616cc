"""SpaceToBatchND / BatchToSpaceND kernels against an element-by-element reference of
TensorFlow's definition (no framework needed)."""
import numpy as np
import pytest

from mace.errors import ModelError
from tests.ops.ir_graph import make_graph, run_graph


def space_to_batch_ref(x, block, pads):
    """out[(i * bw + j) * N + n, h, w, c] = padded[n, h * bh + i, w * bw + j, c]."""
    (bh, bw), (t, left, b, r) = block, pads
    xp = np.pad(x, [(0, 0), (t, b), (left, r), (0, 0)])
    n, hp, wp, c = xp.shape
    out = np.zeros((n * bh * bw, hp // bh, wp // bw, c), x.dtype)
    for i in range(bh):
        for j in range(bw):
            for s in range(n):
                for h in range(hp // bh):
                    for w in range(wp // bw):
                        out[(i * bw + j) * n + s, h, w] = xp[s, h * bh + i, w * bw + j]
    return out


def batch_to_space_ref(x, block, crops):
    (bh, bw), (t, left, b, r) = block, crops
    nb, h, w, c = x.shape
    n = nb // (bh * bw)
    full = np.zeros((n, h * bh, w * bw, c), x.dtype)
    for i in range(bh):
        for j in range(bw):
            for s in range(n):
                full[s, i::bh, j::bw] = x[(i * bw + j) * n + s]
    return full[:, t:h * bh - b, left:w * bw - r]


CASES = [((2, 2), [0, 0, 0, 0], (1, 4, 6, 3)), ((2, 3), [1, 2, 0, 1], (2, 5, 6, 2)),
         ((3, 1), [2, 0, 2, 0], (1, 5, 3, 4)), ((1, 1), [0, 1, 0, 1], (2, 3, 3, 1))]


@pytest.mark.parametrize("block,pads,shape", CASES)
def test_space_to_batch(block, pads, shape):
    x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    args = dict(block_shape=list(block), paddings=pads)
    graph = make_graph(shape, [("SpaceToBatchND", ["x"], ["y"], args)])
    got, _ = run_graph(graph, x, optimise=False)
    np.testing.assert_array_equal(got["y"], space_to_batch_ref(x, block, pads))


@pytest.mark.parametrize("block,crops,shape", [((2, 2), [0, 0, 0, 0], (4, 3, 2, 3)),
                                               ((2, 3), [1, 2, 0, 1], (12, 3, 4, 2)),
                                               ((3, 1), [0, 0, 2, 0], (3, 2, 5, 1))])
def test_batch_to_space(block, crops, shape):
    x = np.random.default_rng(1).uniform(-1, 1, shape).astype(np.float32)
    graph = make_graph(shape, [("BatchToSpaceND", ["x"], ["y"], dict(block_shape=list(block), crops=crops))])
    got, _ = run_graph(graph, x, optimise=False)
    np.testing.assert_array_equal(got["y"], batch_to_space_ref(x, block, crops))


@pytest.mark.parametrize("block,pads,shape", CASES)
def test_round_trip_restores_the_input(block, pads, shape):
    x = np.random.default_rng(2).uniform(-1, 1, shape).astype(np.float32)
    args = dict(block_shape=list(block))
    graph = make_graph(shape, [("SpaceToBatchND", ["x"], ["s"], dict(args, paddings=pads)),
                               ("BatchToSpaceND", ["s"], ["y"], dict(args, crops=pads))])
    got, _ = run_graph(graph, x, optimise=False)
    np.testing.assert_array_equal(got["y"], x)


def test_nchw_shapes_and_constant_folding():
    """An NCHW op (met before the layout pass) infers NCHW shapes and folds through NHWC."""
    x = np.random.default_rng(3).uniform(-1, 1, (1, 4, 6, 3)).astype(np.float32)  # NHWC
    const = np.ascontiguousarray(x.transpose(0, 3, 1, 2))                           # NCHW
    args = dict(block_shape=[2, 3], paddings=[0, 0, 0, 0], data_format="NCHW")
    graph = make_graph((1,), [("SpaceToBatchND", ["c"], ["y"], args)], consts={"c": const})
    assert graph.shape("y") == (6, 3, 2, 2)
    got, _ = run_graph(graph, np.zeros(1))
    np.testing.assert_array_equal(got["y"], space_to_batch_ref(x, (2, 3), [0] * 4).transpose(0, 3, 1, 2))


@pytest.mark.parametrize("op,args,shape,message", [
    ("SpaceToBatchND", dict(block_shape=[2, 2], paddings=[0, 0, 1, 0]), (1, 4, 4, 1), "not divisible"),
    ("SpaceToBatchND", dict(block_shape=[2, 2], paddings=[-1, 0, 1, 0]), (1, 4, 4, 1), "non-negative"),
    ("BatchToSpaceND", dict(block_shape=[2, 2], crops=[0, 0, 0, 0]), (3, 4, 4, 1), "not divisible"),
    ("BatchToSpaceND", dict(block_shape=[2, 2], crops=[5, 0, 4, 0]), (4, 4, 4, 1), "larger than"),
])
def test_bad_arguments_name_the_op(op, args, shape, message):
    with pytest.raises(ModelError, match=message):
        make_graph(shape, [(op, ["x"], ["y"], args)])

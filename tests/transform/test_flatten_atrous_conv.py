"""flatten_atrous_conv: SpaceToBatchND -> conv -> BatchToSpaceND becomes one dilated conv with
the same results; patterns it cannot express are left alone (built by hand, no framework)."""
import numpy as np
import pytest

from mace.ir.args import get_arg
from tests.ops.ir_graph import make_graph, run_graph


def atrous(x_shape, conv_type, rate, s2b_pads, crops, conv_args, seed=0):
    rng = np.random.default_rng(seed)
    c = x_shape[3]
    w = rng.uniform(-1, 1, (c * 2, c, 3, 3) if conv_type == "Conv2D" else (c, 1, 3, 3)).astype(np.float32)
    block = dict(block_shape=[rate, rate])
    ops = [("SpaceToBatchND", ["x"], ["s"], dict(block, paddings=s2b_pads)),
           (conv_type, ["s", "w"], ["c"], conv_args),
           ("BatchToSpaceND", ["c"], ["y"], dict(block, crops=crops))]
    return make_graph(x_shape, ops, consts={"w": w})


def both_ways(*args, **kw):
    """(op types with the pass, max difference between with and without it)."""
    x = np.random.default_rng(9).uniform(-1, 1, args[0]).astype(np.float32)
    plain, _ = run_graph(atrous(*args, **kw), x, {"skip_passes": ["flatten_atrous_conv"]})
    flat, graph = run_graph(atrous(*args, **kw), x)
    assert plain["y"].shape == flat["y"].shape
    return [op.type for op in graph.net.op], float(np.abs(plain["y"] - flat["y"]).max()), graph


@pytest.mark.parametrize("conv_type", ["Conv2D", "DepthwiseConv2d"])
@pytest.mark.parametrize("x_shape,rate,s2b_pads,crops,conv_args", [
    ((1, 8, 8, 2), 2, [2, 2, 2, 2], [0, 0, 0, 0], {}),                      # SAME, as TF writes it
    ((2, 9, 7, 3), 2, [2, 2, 3, 3], [0, 0, 1, 0], {}),                      # odd sizes: crops
    ((1, 12, 12, 2), 3, [0, 0, 0, 0], [0, 0, 0, 0], {}),                    # VALID
    ((1, 8, 8, 2), 2, [0, 0, 0, 0], [0, 0, 0, 0], {"padding": "SAME_UPPER"}),  # conv pads the tiles
    ((1, 8, 10, 1), 2, [1, 0, 1, 2], [1, 0, 0, 0], {"pads": [1, 1, 0, 1]}),
])
def test_flattened_conv_matches(conv_type, x_shape, rate, s2b_pads, crops, conv_args):
    types, diff, graph = both_ways(x_shape, conv_type, rate, s2b_pads, crops, conv_args)
    assert types == [conv_type]
    assert diff < 1e-5
    assert get_arg(graph.net.op[0], "dilations") == [rate, rate]


def test_negative_pad_is_left_alone():
    # cropping more than the S2B padded: the dilated conv would need a negative top pad
    types, diff, _ = both_ways((1, 8, 8, 1), "Conv2D", 2, [0, 0, 0, 0], [2, 0, 0, 0], {})
    assert types == ["SpaceToBatchND", "Conv2D", "BatchToSpaceND"] and diff == 0


def test_strided_conv_is_left_alone():
    types, _, _ = both_ways((1, 8, 8, 1), "Conv2D", 2, [0, 0, 0, 0], [0, 0, 0, 0], {"strides": [2, 2]})
    assert "SpaceToBatchND" in types

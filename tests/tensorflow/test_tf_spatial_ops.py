"""Pad, MirrorPad, resize (every align_corners / half_pixel_centers combination, random
sizes), SpaceToBatchND/BatchToSpaceND (standalone and as dilated convs),
DepthToSpace/SpaceToDepth against TensorFlow."""
import numpy as np
import pytest

from tests.tensorflow.tf_case import check, rand, tf


@pytest.mark.parametrize("mode", ["CONSTANT", "REFLECT", "SYMMETRIC"])
def test_pad(mode):
    pads = [[0, 0], [1, 2], [2, 0], [0, 1]]
    check(lambda x: tf.pad(x, pads, mode=mode, constant_values=0.0 if mode != "CONSTANT" else 0.0),
          {"x": rand(2, 4, 5, 3)}, expect_ops={"Pad" if mode == "CONSTANT" else "MirrorPad"})


def test_pad_v2():
    check(lambda x: tf.pad(x, [[1, 1], [0, 2]], constant_values=-1.5), {"x": rand(3, 4)},
          expect_ops={"PadV2"})


RESIZE_FLAGS = [(False, False), (True, False), (False, True)]


@pytest.mark.parametrize("align,half", RESIZE_FLAGS)
@pytest.mark.parametrize("seed", range(5))
def test_resize_bilinear(align, half, seed):
    rng = np.random.default_rng(seed)
    h, w = int(rng.integers(2, 9)), int(rng.integers(2, 9))
    size = [int(rng.integers(1, 17)), int(rng.integers(1, 17))]

    def f(x):
        return tf.compat.v1.image.resize_bilinear(x, size, align_corners=align, half_pixel_centers=half)
    check(f, {"x": rand(2, h, w, 3, seed=seed)}, expect_ops={"ResizeBilinear"})


@pytest.mark.parametrize("align,half", RESIZE_FLAGS)
@pytest.mark.parametrize("seed", range(3))
def test_resize_bicubic(align, half, seed):
    rng = np.random.default_rng(seed + 20)
    h, w = int(rng.integers(3, 9)), int(rng.integers(3, 9))
    size = [int(rng.integers(2, 17)), int(rng.integers(2, 17))]

    def f(x):
        return tf.compat.v1.image.resize_bicubic(x, size, align_corners=align, half_pixel_centers=half)
    check(f, {"x": rand(2, h, w, 3, seed=seed)}, expect_ops={"ResizeBicubic"})


@pytest.mark.parametrize("align,half", RESIZE_FLAGS)
@pytest.mark.parametrize("seed", range(8))
def test_resize_nearest(align, half, seed):
    rng = np.random.default_rng(seed + 10)
    h, w = int(rng.integers(2, 9)), int(rng.integers(2, 9))
    size = [int(rng.integers(1, 25)), int(rng.integers(1, 25))]

    def f(x):
        return tf.compat.v1.image.resize_nearest_neighbor(x, size, align_corners=align,
                                                          half_pixel_centers=half)
    check(f, {"x": rand(1, h, w, 2, seed=seed)}, expect_ops={"ResizeNearestNeighbor"})


def test_space_to_batch_and_back_standalone():
    def f(x):
        y = tf.space_to_batch_nd(x, [2, 3], [[1, 0], [2, 1]])
        return y * 2.0, tf.batch_to_space(y * 3.0, [2, 3], [[0, 1], [1, 2]])
    check(f, {"x": rand(2, 5, 6, 3)}, expect_ops={"SpaceToBatchND", "BatchToSpaceND"})


@pytest.mark.parametrize("rate,padding,hw", [(2, "SAME", (9, 9)), (3, "VALID", (15, 16)), (2, "SAME", (8, 7)),
                                             (4, "SAME", (12, 16))])
def test_atrous_conv_becomes_one_dilated_conv(rate, padding, hw):
    w = tf.constant(rand(3, 3, 3, 4, seed=1))
    dw = tf.constant(rand(3, 3, 4, 1, seed=2))
    b = rand(4, seed=3)

    def f(x):
        y = tf.nn.bias_add(tf.nn.atrous_conv2d(x, w, rate, padding), b)
        return tf.nn.depthwise_conv2d(tf.nn.relu(y), dw, [1, 1, 1, 1], padding, dilations=[rate, rate])
    _, graph = check(f, {"x": rand(2, *hw, 3)}, expect_ops={"SpaceToBatchND", "BatchToSpaceND"})
    assert [op.type for op in graph.net.op] == ["Conv2D", "DepthwiseConv2d"]
    assert all(list(op.arg[[a.name for a in op.arg].index("dilations")].ints) == [rate, rate]
               for op in graph.net.op)


def test_atrous_conv_without_the_pass_still_matches():
    w = tf.constant(rand(3, 3, 2, 2, seed=1))
    _, graph = check(lambda x: tf.nn.atrous_conv2d(x, w, 2, "SAME"), {"x": rand(1, 7, 9, 2)},
                     options={"skip_passes": ["flatten_atrous_conv"]})
    assert [op.type for op in graph.net.op] == ["SpaceToBatchND", "Conv2D", "BatchToSpaceND"]


@pytest.mark.parametrize("block", [2, 3])
def test_depth_space(block):
    def f(x):
        d = tf.nn.depth_to_space(x, block)
        return d, tf.nn.space_to_depth(d * 2.0, block)
    check(f, {"x": rand(2, 3, 4, 2 * block * block)}, expect_ops={"DepthToSpace", "SpaceToDepth"})

"""Reshape, Squeeze, ExpandDims, Transpose, ConcatV2, Pack, Unpack, Split, SplitV, Slice,
StridedSlice (random masks), Tile, GatherV2 and static shape chains against TensorFlow."""
import numpy as np
import pytest

from tests.tensorflow.tf_case import check, rand, tf


def test_reshape_with_inferred_axis():
    check(lambda x: tf.reshape(x, [-1, 6]) * 2.0, {"x": rand(2, 3, 4)}, expect_ops={"Reshape"})


def test_shape_chain_folds_into_reshape():
    # Keras' Reshape: the batch comes from tf.shape at run time; with static shapes it folds.
    def f(x):
        s = tf.shape(x)
        return tf.reshape(x, tf.stack([s[0], s[1] * s[2], -1]))
    _, graph = check(f, {"x": rand(2, 3, 4, 5)}, expect_ops={"Shape", "StridedSlice", "Pack"},
                     unknown_batch=True)
    assert [op.type for op in graph.net.op] == ["Reshape"]


def test_squeeze_expand_dims():
    check(lambda x: tf.expand_dims(tf.squeeze(x, [1]), -1), {"x": rand(2, 1, 3, 1)},
          expect_ops={"Squeeze", "ExpandDims"})
    check(lambda x: tf.squeeze(x), {"x": rand(1, 3, 1, 2)}, expect_ops={"Squeeze"})


def test_transpose():
    check(lambda x: tf.transpose(x, [0, 3, 1, 2]) + 1.0, {"x": rand(2, 3, 4, 5)}, expect_ops={"Transpose"})


@pytest.mark.parametrize("axis", [0, -1, 2])
def test_concat(axis):
    c = rand(2, 3, 4, seed=3)
    check(lambda x, y: tf.concat([x, c, y], axis), {"x": rand(2, 3, 4), "y": rand(2, 3, 4, seed=1)},
          expect_ops={"ConcatV2"})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_pack_unpack(axis):
    def f(x, y):
        parts = tf.unstack(tf.stack([x, y, x * y], axis=axis), axis=axis)
        return parts[0] + parts[2], parts[1]
    check(f, {"x": rand(3, 4), "y": rand(3, 4, seed=1)}, expect_ops={"Pack", "Unpack"})


def test_split_and_split_v():
    def f(x):
        a, b, c = tf.split(x, 3, axis=-1)
        d, e = tf.split(x, [2, -1], axis=1)
        return a * c + b, d, e
    check(f, {"x": rand(2, 5, 6)}, expect_ops={"Split", "SplitV"})


def test_slice():
    check(lambda x: tf.slice(x, [0, 1, 2], [2, -1, 3]), {"x": rand(3, 4, 6)}, expect_ops={"Slice"})


def random_strided_slice(seed, shape):
    """Random begin/end/strides and masks over `shape` (some axes new, some shrunk, maybe ...)."""
    rng = np.random.default_rng(seed)
    spec, masks = [], dict(begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0)
    axis = 0
    use_ellipsis = rng.random() < 0.4
    while axis < len(shape):
        i = len(spec)
        if use_ellipsis and rng.random() < 0.3:
            masks["ellipsis_mask"] |= 1 << i
            spec.append((0, 0, 1))
            axis = len(shape) - int(rng.integers(0, len(shape) - axis + 1))
            use_ellipsis = False
            continue
        if rng.random() < 0.15:
            masks["new_axis_mask"] |= 1 << i
            spec.append((0, 0, 1))
            continue
        d = shape[axis]
        if rng.random() < 0.2:
            masks["shrink_axis_mask"] |= 1 << i
            spec.append((int(rng.integers(-d, d)), 0, 1))
        else:
            step = int(rng.choice([1, 1, 2, -1, -2, 3]))
            spec.append((int(rng.integers(-d - 2, d + 2)), int(rng.integers(-d - 2, d + 2)), step))
            masks["begin_mask"] |= int(rng.random() < 0.3) << i
            masks["end_mask"] |= int(rng.random() < 0.3) << i
        axis += 1
    begin, end, strides = (list(v) for v in zip(*spec))
    return begin, end, strides, masks


@pytest.mark.parametrize("seed", range(24))
def test_strided_slice_random(seed):
    x = rand(4, 5, 6, 3, seed=seed)
    begin, end, strides, masks = random_strided_slice(seed, x.shape)

    def f(t):
        return tf.strided_slice(t, begin, end, strides, **masks) + 0.0
    check(f, {"x": x}, expect_ops={"StridedSlice"})


def test_strided_slice_python_syntax():
    check(lambda x: x[:, ::-1, 1:-1:2, tf.newaxis, 0] * 1.0, {"x": rand(2, 5, 7, 3)},
          expect_ops={"StridedSlice"})
    check(lambda x: x[..., 1] + x[0, :, 0][None], {"x": rand(1, 4, 3)}, expect_ops={"StridedSlice"})


def test_tile_and_gather():
    idx = np.array([[2, 0], [1, 1]], np.int32)
    check(lambda x: tf.gather(tf.tile(x, [2, 1, 3]), idx, axis=1), {"x": rand(2, 3, 2)},
          expect_ops={"Tile", "GatherV2"})


def test_fill_range_shape_size():
    def f(x):
        n = tf.raw_ops.Size(input=x)
        ramp = tf.cast(tf.range(0, tf.shape(x)[0] + 2, 1), tf.float32)
        return x * ramp + tf.fill(tf.shape(x), 0.5) + tf.cast(n, tf.float32) + tf.raw_ops.ZerosLike(x=x)
    _, graph = check(f, {"x": rand(2, 3, 4)}, expect_ops={"Shape", "Fill", "Range", "Size", "ZerosLike"},
                     unknown_batch=True)
    assert {op.type for op in graph.net.op} == {"Eltwise"}  # everything shape-derived folded


def test_identity_and_stop_gradient_leave_no_ops():
    def f(x):
        return tf.identity(tf.stop_gradient(tf.nn.relu(x))) * 3.0
    _, graph = check(f, {"x": rand(2, 3)}, expect_ops={"StopGradient", "Identity"})
    assert [op.type for op in graph.net.op] == ["Activation", "Eltwise"]


def test_placeholder_with_default_flows():
    def f(x):
        default = tf.raw_ops.PlaceholderWithDefault(input=tf.constant([1.0, 2.0, 3.0]), shape=[3])
        return x + default
    check(f, {"x": rand(2, 3)}, expect_ops={"PlaceholderWithDefault"})


def test_older_and_rarer_spellings():
    """Op variants tf.function no longer emits but older frozen graphs contain."""
    idx = np.array([2, 0], np.int32)

    def f(x):
        r = tf.raw_ops
        y = r.Concat(concat_dim=1, values=[x, x * 2.0])
        y = r.Gather(params=y, indices=idx)
        a, b = r.IdentityN(input=[y, r.Snapshot(input=y)])
        shape_a, _ = r.ShapeN(input=[a, b])
        extra = tf.cast(tf.reduce_sum(shape_a) + r.Rank(input=a), tf.float32)
        return r.EnsureShape(input=a, shape=[2, 6]) + b * r.OnesLike(x=b) + extra
    check(f, {"x": rand(3, 3)}, expect_ops={"Concat", "Gather", "IdentityN", "Snapshot", "ShapeN", "Rank",
                                            "OnesLike", "EnsureShape"})

"""The float depthwise loop (mace/ops/fast/_loops.py: depthwise, its pool twin depthwise_par):
the 3x3 and 5x5 interiors, 16 and 8 channels at a time with the taps in registers (_dw_pixels), must
give the bytes of the loop's own tap-by-tap path, and the kernel the numpy reference's values
(NaN and inf where the reference has them), down to an ONNX model against onnxruntime."""
import numpy as np
import pytest

from mace.ops.fast._base import NO_STORE
from mace.ops.fast._jit import loops
from tests.ops.test_fast_kernels import close, conv_case, jit, run_both  # noqa: F401 (jit: a fixture)

pytestmark = pytest.mark.skipif(loops() is None, reason="numba is not installed")

F32 = np.float32
NO_CLIP, RELU6 = (F32(-np.inf), F32(np.inf)), (F32(0), F32(6))

# (k, n, h, w, c, stride, dilation, pad_t, pad_l): k x k filters; channels over, under and
# between the 16- and 8-channel blocks, images with no interior at all, stride 2, dilation,
# uneven pads
LOOP_CASES = [
    (3, 1, 9, 11, 16, 1, 1, 1, 1), (3, 1, 9, 11, 48, 1, 1, 1, 1), (3, 2, 7, 6, 24, 1, 1, 1, 1),
    (3, 1, 8, 9, 17, 2, 1, 1, 1), (3, 1, 10, 10, 40, 2, 1, 0, 1), (3, 1, 6, 13, 33, 1, 2, 2, 2),
    (3, 1, 5, 5, 8, 1, 1, 0, 0), (3, 1, 3, 3, 15, 1, 1, 1, 1), (3, 1, 1, 1, 16, 1, 1, 1, 1),
    (3, 1, 2, 3, 3, 1, 1, 1, 0), (3, 1, 4, 17, 1, 2, 1, 1, 2), (3, 1, 12, 4, 72, 2, 2, 2, 2),
    (5, 1, 11, 12, 16, 1, 1, 2, 2), (5, 1, 9, 13, 40, 2, 1, 1, 2), (5, 2, 8, 8, 25, 1, 1, 2, 2),
    (5, 1, 12, 14, 32, 1, 2, 4, 3), (5, 1, 5, 5, 8, 1, 1, 0, 0), (5, 1, 3, 4, 16, 1, 1, 2, 2),
]


def _geometry(h, w, kh, kw, s, d, pad_t, pad_l):
    """Output size for pads pad_t / pad_l at both ends (the loop reads only the top and left
    pads: the output shape says the rest)."""
    pad_b, pad_r = pad_t, pad_l
    return (h + pad_t + pad_b - d * (kh - 1) - 1) // s + 1, (w + pad_l + pad_r - d * (kw - 1) - 1) // s + 1


def _run(x, taps, bias, clip, s, d, pad_t, pad_l, shape, parts):
    out = np.full(shape, 7.0, F32)   # every pixel must be written
    args = (x, taps, bias, *clip, NO_STORE, s, s, d, d, pad_t, pad_l, out)
    if parts > 1:
        loops().depthwise_par(*args, parts)
    else:
        loops().depthwise(*args, 0, shape[0] * shape[1])
    return out


@pytest.mark.parametrize("parts", [1, 2], ids=["serial", "pool-split"])
@pytest.mark.parametrize("clip", [NO_CLIP, RELU6], ids=["none", "relu6"])
@pytest.mark.parametrize("case", LOOP_CASES, ids=str)
def test_interior_is_the_tap_by_tap_bytes(case, clip, parts):
    """The same filter with one more, zero column of taps takes the tap-by-tap path everywhere;
    on finite inputs x * 0 adds nothing, so its bytes are what the k x k interior must give
    (the same multiply-adds in the same order)."""
    k, n, h, w, c, s, d, pad_t, pad_l = case
    rng = np.random.default_rng(h * 100 + c)
    x = rng.standard_normal((n, h, w, c)).astype(F32)
    taps = rng.standard_normal((k, k, c)).astype(F32)
    bias = rng.standard_normal(c).astype(F32)
    oh, ow = _geometry(h, w, k, k, s, d, pad_t, pad_l)
    assert oh >= 1 and ow >= 1
    wide = np.zeros((k, k + 1, c), F32)
    wide[:, :k] = taps
    got = _run(x, taps, bias, clip, s, d, pad_t, pad_l, (n, oh, ow, c), parts)
    want = _run(x, wide, bias, clip, s, d, pad_t, pad_l, (n, oh, ow, c), parts)
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("case", [
    dict(c=16, h=12, w=12), dict(c=24, h=9, w=10, s=(2, 2), act="RELUX"),
    dict(c=33, h=7, w=8, pads=(0, 1, 1, 0)), dict(c=48, h=3, w=3, act="RELU"),
    dict(c=8, h=1, w=1), dict(c=40, h=11, w=13, s=(2, 2), pads=(0, 0, 1, 1)),
    dict(c=72, h=6, w=9, d=(2, 2), pads=(2, 2, 2, 2), act="RELUX"),
    dict(n=2, c=17, h=5, w=6, pads=(1, 0, 1, 0), bias=False),
    dict(c=48, h=10, w=12, k=(5, 5), pads=(2, 2, 2, 2), act="RELUX"),
    dict(c=24, h=13, w=9, k=(5, 5), s=(2, 2), pads=(1, 2, 2, 1)),
], ids=str)
def test_depthwise_matches_reference(case, jit):
    got, want, _ = run_both("DepthwiseConv2d", *depthwise_case(case))
    close(got, want)


def depthwise_case(case: dict) -> tuple:
    """(x, consts, args) of a DepthwiseConv2d: conv_case's, c channels in and out, multiplier 1."""
    case = dict(case)
    c = case.pop("c")
    x, consts, args = conv_case(np.random.default_rng(c), c=c, o=c, **case)
    consts[0] = consts[0][:, :1]          # [C, 1, kh, kw]
    args.pop("group")
    return x, consts, args


@pytest.mark.parametrize("case", [
    dict(c=60, h=13, w=1, k=(13, 1), pads=(0, 0, 0, 0)),                      # a wake-word stream's
    dict(c=30, h=5, w=1, k=(5, 1), pads=(0, 0, 0, 0), act="RELU"),
    dict(c=20, h=17, w=1, k=(3, 1), s=(2, 1), d=(1, 1), pads=(1, 0, 2, 0), n=2, act="RELUX"),
    dict(c=7, h=1, w=19, k=(1, 5), s=(1, 3), d=(1, 2), pads=(0, 3, 0, 1)),     # along W (Keras' Conv1D)
    dict(c=9, h=1, w=6, k=(1, 3), pads=(0, 1, 0, 1), act="LEAKYRELU", bias=False),
    dict(c=12, h=9, w=1, k=(4, 1), pads=(2, 0, 1, 0), act="TANH")])
def test_depthwise_along_one_axis(case, jit):
    """A 1-D depthwise conv written as 2-D (W or H of 1, the filter 1 along it) runs the line
    loop (_line_loops) where numba is: the reference's bytes with a clip or none, its numbers
    whatever the padding, stride, dilation, batch and activation (one with a store loop in place
    after it; TANH, whose loop is the store's only, stays on the general loop)."""
    x, consts, args = depthwise_case(case)
    got, want, kern = run_both("DepthwiseConv2d", x, consts, args)
    if getattr(kern, "line", None) is not None and args.get("activation") in (None, "RELU", "RELUX"):
        np.testing.assert_array_equal(got, want)   # the reference's roundings, tap by tap
    close(got, want)
    # TANH: the general loop's store has it, no in-place loop does: that conv stays there
    assert (getattr(kern, "line", None) is not None) == (jit != "numpy" and args.get("activation") != "TANH")


@pytest.mark.parametrize("c", [16, 17, 30, 47, 60, 64, 65, 70, 96, 128, 130, 200])
@pytest.mark.parametrize("clip", [NO_CLIP, RELU6])
def test_line_taps_in_registers_give_the_line_loops_bytes(c, clip):
    """depthwise_taps (16 channels or more: a row's channels in <16 x float> registers, the last
    vector overlapping the one before it) against depthwise_line, byte for byte: channels on,
    under and past the 16 / 64 blocks; taps cut by pads at either end, stride, dilation, two
    images, a window longer than the line; NaN and +-inf in the line; serial and split."""
    from mace.ops.fast._jit import op_loops
    lines = op_loops("_line_loops")
    rng = np.random.default_rng(c)
    cases = [(21, 21, 1, 1, 0, 1), (13, 4, 2, 1, 2, 2), (19, 5, 3, 2, 3, 1), (3, 7, 1, 1, 3, 1), (9, 3, 1, 4, 4, 2)]
    for length, k, stride, dil, pad, n in cases:
        ol = (length + 2 * pad - dil * (k - 1) - 1) // stride + 1
        x = rng.standard_normal((n, length, c)).astype(F32)
        x[0, 0, :3] = [np.nan, np.inf, -np.inf]
        x[n - 1, length - 1, c - 2:] = [np.inf, np.nan]
        w, bias = rng.standard_normal((k, c)).astype(F32), rng.standard_normal(c).astype(F32)
        want = np.full((n, ol, c), 7, F32)
        lines.depthwise_line(x, w, bias, *clip, stride, dil, pad, want, 0, n * ol)
        for parts in (1, 3):
            got = np.full_like(want, 7)
            if parts == 1:
                lines.depthwise_taps(x, w, bias, *clip, stride, dil, pad, got, 0, n * ol)
            else:
                lines.depthwise_taps_par(x, w, bias, *clip, stride, dil, pad, got, parts)
            assert got.tobytes() == want.tobytes(), (length, k, stride, dil, pad, n, parts)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")   # the reference's inf - inf
@pytest.mark.parametrize("act", ["", "RELUX"])
def test_nan_and_inf_land_where_the_reference_puts_them(act, jit):
    """NaN and +-inf inputs (interior and border pixels, 16-, 8- and 1-channel parts): the
    same NaN / inf pattern as the numpy reference and its values elsewhere."""
    c = 25
    x, consts, args = conv_case(np.random.default_rng(3), h=10, w=11, c=c, o=c, act=act)
    consts[0] = consts[0][:, :1]
    args.pop("group")
    x[0, 4, 5, [0, 9, 17, 24]] = np.nan
    x[0, 0, 0, [1, 10, 18]] = np.inf
    x[0, 7, 2, [2, 11, 24]] = -np.inf
    x[0, 7, 3, [2, 11, 24]] = np.inf      # neighbours: +inf and -inf in one window give NaN
    got, want, _ = run_both("DepthwiseConv2d", x, consts, args)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got) & (got > 0), np.isinf(want) & (want > 0))
    np.testing.assert_array_equal(np.isinf(got) & (got < 0), np.isinf(want) & (want < 0))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=0, atol=2e-5 * np.abs(want[finite]).max())


def test_onnx_depthwise_stack_matches_onnxruntime_on_fast_kernels():
    """End to end: 3x3 and 5x5 depthwise convs (stride 1 and 2, uneven pads, 40 channels: two
    16-blocks and an 8-block) with Clip / HardSwish / Relu after them, against onnxruntime;
    every depthwise conv binds the cpu:fast kernel."""
    pytest.importorskip("onnxruntime")
    from onnx import helper
    from tests.ops.onnx_graph import check_model, graph_model
    rng = np.random.default_rng(11)
    c = 40
    size = {"d1": 3, "d2": 3, "d3": 5}
    dw = lambda i, o, stride, pads: helper.make_node(  # noqa: E731
        "Conv", [i, f"w{o}", f"b{o}"], [o], group=c, kernel_shape=[size[o]] * 2, strides=[stride] * 2,
        pads=pads)
    nodes = [dw("x", "d1", 1, [1, 1, 1, 1]), helper.make_node("Clip", ["d1", "lo", "hi"], ["a1"]),
             dw("a1", "d2", 2, [0, 1, 1, 0]), helper.make_node("HardSwish", ["d2"], ["a2"]),
             dw("a2", "d3", 1, [2, 2, 2, 2]), helper.make_node("Relu", ["d3"], ["y"])]
    consts = {"lo": F32(0), "hi": F32(6)}
    for o in ("d1", "d2", "d3"):
        consts[f"w{o}"] = (rng.standard_normal((c, 1, size[o], size[o])) * 0.5).astype(F32)
        consts[f"b{o}"] = rng.standard_normal(c).astype(F32)
    x = rng.standard_normal((1, c, 21, 19)).astype(F32)
    model = graph_model(nodes, {"x": x}, {"y": np.float32}, consts, opset=17)
    _, engine = check_model(model, {"x": x})
    tags = {n.tag for n in engine.nodes if n.op.type == "DepthwiseConv2d"}
    assert tags == {"cpu:fast"}, tags

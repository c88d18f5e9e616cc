"""MatMul, Gather, Slice, Split, Expand, Tile, Where, Cast, Range, ArgMax/ArgMin, Reduce*,
LayerNormalization against onnxruntime, plus small Conv graphs that exercise the NHWC pass."""
import numpy as np
import pytest
from onnx import helper

from tests.ops.onnx_case import check, rand
from tests.ops.onnx_graph import check_model, check_op, graph_model, op_types

I64 = np.int64


def ints(*v):
    return np.array(v, I64)


# ---- MatMul -------------------------------------------------------------------------
@pytest.mark.parametrize("a,b", [
    ((3,), (3,)), ((5,), (5, 4)), ((4, 5), (5,)), ((3, 7), (7, 2)), ((2, 3, 7), (7, 5)),
    ((6,), (2, 6, 3)), ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 6)), ((1, 3, 4), (3, 4, 1)),
])
def test_matmul_inputs(a, b):
    check("MatMul", {"a": rand(*a), "b": rand(*b, seed=1)})


@pytest.mark.parametrize("seed", range(15))
def test_matmul_random_broadcast(seed):
    rng = np.random.default_rng(seed)
    m, k, n = (int(d) for d in rng.integers(1, 7, 3))
    batch = [int(d) for d in rng.integers(1, 4, rng.integers(0, 3))]
    # Each operand keeps a random suffix of the batch dims, some of them set to 1.
    a_batch = [d if rng.random() < 0.7 else 1 for d in batch[rng.integers(0, len(batch) + 1):]]
    b_batch = [d if rng.random() < 0.7 else 1 for d in batch[rng.integers(0, len(batch) + 1):]]
    a, b = tuple(a_batch) + (m, k), tuple(b_batch) + (k, n)
    if rng.random() < 0.5:
        check("MatMul", {"a": rand(*a, seed=seed), "b": rand(*b, seed=seed + 1)})
    else:
        check("MatMul", {"a": rand(*a, seed=seed)}, {"b": rand(*b, seed=seed + 1)})


@pytest.mark.parametrize("a,b,fc", [
    ((3, 7), (7, 5), True), ((2, 3, 7), (7, 5), True), ((2, 2, 3, 9), (9, 1), True),
    ((7,), (7, 5), False), ((2, 3, 7), (2, 7, 5), False), ((4, 3), (3,), False),
])
def test_matmul_const_b(a, b, fc):
    engine = check_op("MatMul", {"a": rand(*a)}, {"b": rand(*b, seed=1)})
    assert op_types(engine) == ["FullyConnected" if fc else "MatMul"]


def test_matmul_const_a():
    check("MatMul", {"b": rand(2, 5, 3, seed=1)}, {"a": rand(4, 5)}, input_order=["a", "b"])


def test_matmul_int64():
    rng = np.random.default_rng(3)
    a, b = rng.integers(-5, 5, (2, 3, 4)), rng.integers(-5, 5, (4, 6))
    engine = check_op("MatMul", {"a": a}, {"b": b}, out_types=[I64])
    assert op_types(engine) == ["MatMul"]


@pytest.mark.parametrize("a,bias,first", [((3, 7), (5,), True), ((2, 3, 7), (5,), False),
                                           ((2, 4, 7), (1, 1, 5), True)])
def test_matmul_add_folds_into_fc(a, bias, first):
    """MatMul by a constant then Add of a per-feature constant is one FullyConnected with bias."""
    add_in = ["mm", "c"] if first else ["c", "mm"]
    model = graph_model(
        [helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Add", add_in, ["y"])],
        {"x": rand(*a)}, {"y": np.float32}, {"w": rand(7, 5, seed=1), "c": rand(*bias, seed=2)})
    _, engine = check_model(model, {"x": rand(*a)})
    assert op_types(engine) == ["FullyConnected"]
    assert len(engine.graph.net.op[0].input) == 3  # x, weight, bias


@pytest.mark.parametrize("a,b,ta,tb", [((2, 3, 4), (3, 5), 1, 0), ((3, 4), (2, 5, 4), 0, 1),
                                       ((4, 3), (5, 4), 1, 1), ((4,), (5, 4), 0, 1)])
@pytest.mark.parametrize("const_b", [False, True])
def test_matmul_transpose_args(a, b, ta, tb, const_b):
    """transpose_a / transpose_b (no ONNX node sets transpose_a) against numpy."""
    from mace.ir.graph import Graph
    from mace.ops.registry import KernelContext, select_kernel
    from mace.transform.shape_inference import infer_op

    x, w = rand(*a), rand(*b, seed=1)
    graph = Graph()
    graph.specs["x"] = (a, np.dtype(np.float32))
    if const_b:
        graph.add_const("w", w)
    else:
        graph.specs["w"] = (b, np.dtype(np.float32))
    op = graph.add_op("MatMul", ["x", "w"], ["y"], transpose_a=ta, transpose_b=tb)
    infer_op(graph, op)
    shape, dtype = graph.specs["y"]
    cls, _ = select_kernel("MatMul", ["cpu"])
    kern = cls(KernelContext(op, [a, b], [np.dtype(np.float32)] * 2, [shape], [dtype],
                             consts=[None, w if const_b else None]))
    out = np.empty(shape, dtype)
    kern.run([x, w], [out])
    want = np.matmul(np.swapaxes(x, -1, -2) if ta and x.ndim > 1 else x,
                     np.swapaxes(w, -1, -2) if tb else w)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("attrs,c", [({"transA": 1, "alpha": 0.5}, None), ({"transB": 1}, (5,)),
                                     ({"transA": 1, "transB": 1, "beta": 0.3}, (4, 5))])
def test_gemm_runtime_b(attrs, c):
    """Gemm with a B fed at run time becomes the IR MatMul (plus scaling and Add)."""
    a = rand(3, 4) if attrs.get("transA") else rand(4, 3)
    b = rand(5, 3, seed=1) if attrs.get("transB") else rand(3, 5, seed=1)
    consts = {} if c is None else {"c": rand(*c, seed=2)}
    check("Gemm", {"a": a, "b": b}, consts, attrs)


def test_gemm_const_b_without_c():
    """Gemm with a constant B and no C is one FullyConnected (no bias)."""
    check("Gemm", {"a": rand(2, 3)}, {"b": rand(4, 3, seed=1)}, {"transB": 1, "alpha": 0.5})


# ---- Gather -------------------------------------------------------------------------
@pytest.mark.parametrize("shape,axis,indices", [
    ((5,), 0, [4, -1, 0]), ((3, 4, 5), 1, [[0, -1], [2, 1]]), ((3, 4, 5), -1, 2),
    ((2, 7, 3), -2, [-7, 6, 3, 3]), ((6, 3), 0, [[[1]], [[-2]]]),
])
def test_gather_const_indices(shape, axis, indices):
    check("Gather", {"x": rand(*shape)}, {"i": np.array(indices, I64)}, {"axis": axis})


def test_gather_embedding():
    """Constant table, indices fed at run time (int32 and int64)."""
    check("Gather", {"i": np.array([[1, 0, -1], [4, 4, 2]], I64)}, {"t": rand(5, 3)},
          input_order=["t", "i"])
    check("Gather", {"i": np.array([3, -5], np.int32)}, {"t": rand(5, 3)}, {"axis": 0},
          input_order=["t", "i"])


# ---- Slice --------------------------------------------------------------------------
BIG = 2 ** 63 - 1


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([1, 0], [3, BIG], [0, 2], [1, 2]),
    ([-1], [-BIG], [1], [-1]),                    # reverse a whole axis
    ([-10, 1], [-20, 100], [0, -1], [-1, 3]),     # start below 0 with a negative step clamps to 0
    ([4, 5, 2], [0, -8, 5], [-3, 1, 2], [-2, -1, 1]),
    ([7], [2], [2], [1]),                         # empty result
    ([2], [-1], [None], [None]),                  # axes and steps omitted
    ([3, -2], [BIG, 2 ** 31 - 1], [0, 2], [-1, -2]),  # INT_MAX ends with negative steps
])
def test_slice(starts, ends, axes, steps):
    consts = {"s": ints(*starts), "e": ints(*ends)}
    order = ["x", "s", "e"]
    if axes[0] is not None:
        consts["a"] = ints(*axes)
        order.append("a")
    if steps[0] is not None:
        consts["st"] = ints(*steps)
        order += ([] if "a" in consts else [""]) + ["st"]
    check("Slice", {"x": rand(5, 6, 7)}, consts, opset=13, input_order=order)


def test_slice_omitted_axes_with_steps():
    check("Slice", {"x": rand(4, 5)}, {"s": ints(3, 4), "e": ints(-BIG, 0), "st": ints(-1, -2)},
          input_order=["x", "s", "e", "", "st"])


@pytest.mark.parametrize("seed", range(40))
def test_slice_random(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(d) for d in rng.integers(1, 8, rng.integers(1, 5)))
    axes = [int(a) for a in rng.permutation(len(shape))[:rng.integers(1, len(shape) + 1)]]
    bound = lambda d: int(rng.choice([rng.integers(-d - 3, d + 4), BIG, -BIG], p=[0.8, 0.1, 0.1]))
    starts = [bound(shape[a]) for a in axes]
    ends = [bound(shape[a]) for a in axes]
    steps = [int(rng.choice([-3, -2, -1, 1, 2, 3])) for _ in axes]
    axes = [a - len(shape) if rng.random() < 0.5 else a for a in axes]  # some negative
    check("Slice", {"x": rand(*shape, seed=seed)},
          {"s": ints(*starts), "e": ints(*ends), "a": ints(*axes), "st": ints(*steps)})


@pytest.mark.parametrize("attrs", [
    {"starts": [1, 0], "ends": [3, 1000]},
    {"starts": [-3], "ends": [-1], "axes": [2]},
    {"starts": [0, 2], "ends": [1, BIG], "axes": [-1, 0]},
])
def test_slice_opset9(attrs):
    check("Slice", {"x": rand(4, 5, 6)}, attrs=attrs, opset=9)


# ---- Split --------------------------------------------------------------------------
@pytest.mark.parametrize("shape,axis,split,opset", [
    ((6, 5), 0, None, 11), ((3, 9), -1, [2, 3, 4], 11), ((2, 7, 3), 1, [7], 11),
    ((4, 10), 1, [1, 6, 0, 3], 13), ((4, 6), -2, None, 13), ((5, 7, 2), 0, [1, 4], 13),
])
def test_split(shape, axis, split, opset):
    n = len(split) if split else 2
    if opset >= 13 and split:
        check("Split", {"x": rand(*shape)}, {"sp": ints(*split)}, {"axis": axis}, n_outputs=n,
              opset=opset)
    else:
        attrs = {"axis": axis, **({"split": split} if split else {})}
        check("Split", {"x": rand(*shape)}, attrs=attrs, n_outputs=n, opset=opset)


@pytest.mark.parametrize("dim,num", [(7, 3), (9, 3), (5, 2), (10, 4)])
def test_split_num_outputs(dim, num):
    check_op("Split", {"x": rand(3, dim)}, attrs={"axis": 1, "num_outputs": num}, n_outputs=num,
             opset=18)


# ---- Expand, Tile -------------------------------------------------------------------
@pytest.mark.parametrize("shape,target", [
    ((3, 1), (2, 1, 4)), ((1,), (5,)), ((2, 1, 4), (2, 3, 1)), ((4, 1, 5), (1, 1)),
    ((), (2, 3)), ((1, 3, 1, 1), (2, 3, 4, 5)),
])
def test_expand(shape, target):
    check("Expand", {"x": rand(*shape)}, {"s": ints(*target)})


@pytest.mark.parametrize("shape,reps", [((3, 1), (2, 3)), ((2, 3, 4), (1, 1, 2)), ((5,), (3,)),
                                        ((2, 1, 3, 2), (1, 2, 1, 3))])
def test_tile(shape, reps):
    check("Tile", {"x": rand(*shape)}, {"r": ints(*reps)})


# ---- Where, Cast, Range -------------------------------------------------------------
def test_where():
    check("Where", {"c": rand(3, 1) > 0, "x": rand(1, 4)}, {"y": rand(4, seed=3)})
    check("Where", {"x": rand(2, 3, 4), "y": rand(2, 1, 4, seed=1)},
          {"c": rand(3, 1, seed=2) > 0}, input_order=["c", "x", "y"])
    rng = np.random.default_rng(0)
    check("Where", {"c": rand(5) > 0, "x": rng.integers(0, 9, (5,)), "y": rng.integers(0, 9, (2, 5))},
          out_types=[I64])


@pytest.mark.parametrize("x,to,out", [
    (rand(3, 4, high=5.0, low=-5.0), 7, I64),            # float -> int64 truncates toward 0
    (rand(6, low=-3.0, high=3.0).round(), 9, np.bool_),  # float -> bool (zeros included)
    (np.arange(-3, 5, dtype=I64).reshape(2, 4), 1, np.float32),
    (np.array([True, False, True]), 1, np.float32),
    (rand(2, 3, high=100.0), 6, np.int32),
    (rand(2, 3), 10, np.float16),
])
def test_cast(x, to, out):
    check("Cast", {"x": x}, attrs={"to": to}, out_types=[out])


def test_cast_through_double():
    """A float32 -> DOUBLE -> float32 round trip changes no value: it converts to one Cast."""
    x = rand(3, 4)
    model = graph_model([helper.make_node("Cast", ["x"], ["d"], to=11),
                         helper.make_node("Cast", ["d"], ["y"], to=1)],
                        {"x": x}, {"y": np.float32})
    check_model(model, {"x": x})


def test_cast_like():
    check("CastLike", {"x": rand(2, 3, high=9.0)}, {"t": ints(1)}, out_types=[I64])


@pytest.mark.parametrize("start,limit,delta", [(0, 7, 1), (1.5, 7.0, 0.7), (10, 2, -3), (5, 5, 1),
                                               (-2.0, 3.0, 0.25)])
def test_range(start, limit, delta):
    dtype = I64 if isinstance(start, int) else np.float32
    check("Range", {}, {"a": np.array(start, dtype), "b": np.array(limit, dtype),
                        "c": np.array(delta, dtype)}, out_types=[dtype])


def test_range_of_input_shape():
    """Shape -> Gather -> Range folds to a constant; the Range length follows the input."""
    model = graph_model(
        [helper.make_node("Shape", ["x"], ["s"]),
         helper.make_node("Gather", ["s", "i"], ["n"], axis=0),
         helper.make_node("Range", ["z", "n", "one"], ["r"]),
         helper.make_node("Cast", ["r"], ["rf"], to=1),
         helper.make_node("Add", ["x", "rf"], ["y"])],
        {"x": rand(3, 5)}, {"y": np.float32},
        {"i": np.array(1, I64), "z": np.array(0, I64), "one": np.array(1, I64)})
    _, engine = check_model(model, {"x": rand(3, 5)})
    assert op_types(engine) == ["Eltwise"]


# ---- ArgMax / ArgMin ----------------------------------------------------------------
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("shape,axis,keepdims,last", [
    ((7,), 0, 1, 0), ((3, 4, 5), 1, 0, 0), ((3, 4, 5), -1, 1, 1), ((2, 3, 4, 5), 0, 0, 1),
    ((6, 2), -2, 1, 0),
])
def test_argmax(op, shape, axis, keepdims, last):
    x = np.round(rand(*shape) * 2)  # few distinct values: many ties
    check(op, {"x": x}, attrs={"axis": axis, "keepdims": keepdims, "select_last_index": last},
          out_types=[I64])


# ---- Reduce* ------------------------------------------------------------------------
REDUCE_OPS = ["ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare", "ReduceLogSum"]
AXES = [([1], 1), ([0, 2], 0), ([-1, 1], 1), (None, 0), (None, 1), ([3, -4], 0)]


def _reduce_input(op):
    x = rand(2, 3, 4, 5, low=0.2, high=1.5)  # positive: LogSum needs it, Prod stays tame
    return x * 40 if op == "ReduceLogSumExp" else x  # would overflow a naive exp


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("axes,keepdims", AXES)
def test_reduce_axes_attr(op, axes, keepdims):
    attrs = {"keepdims": keepdims, **({"axes": axes} if axes is not None else {})}
    check(op, {"x": _reduce_input(op)}, attrs=attrs, opset=13 if op != "ReduceSum" else 11,
          rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("axes,keepdims", AXES)
def test_reduce_axes_input(op, axes, keepdims):
    x = _reduce_input(op)
    opset = 13 if op == "ReduceSum" else 18
    if axes is None:
        check_op(op, {"x": x}, attrs={"keepdims": keepdims}, opset=opset, atol=1e-4)
    else:
        check_op(op, {"x": x}, {"a": ints(*axes)}, {"keepdims": keepdims}, opset=opset, atol=1e-4)


@pytest.mark.parametrize("seed", range(20))
def test_reduce_random(seed):
    rng = np.random.default_rng(seed)
    op = str(rng.choice(REDUCE_OPS))
    shape = tuple(int(d) for d in rng.integers(1, 6, rng.integers(1, 5)))
    axes = [int(a) - (len(shape) if rng.random() < 0.5 else 0)
            for a in rng.permutation(len(shape))[:rng.integers(1, len(shape) + 1)]]
    x = rand(*shape, seed=seed, low=0.2, high=1.5)
    check_op(op, {"x": x}, {"a": ints(*axes)}, {"keepdims": int(rng.integers(0, 2))}, opset=18,
             atol=1e-4)


@pytest.mark.parametrize("op,opset", [("ReduceSum", 13), ("ReduceMean", 18), ("ReduceMax", 18)])
def test_reduce_noop_with_empty_axes(op, opset):
    check_op(op, {"x": rand(3, 4)}, attrs={"noop_with_empty_axes": 1}, opset=opset)
    check_op(op, {"x": rand(3, 4)}, {"a": np.zeros(0, I64)}, {"noop_with_empty_axes": 1},
             opset=opset)


def test_reduce_int64():
    x = np.random.default_rng(1).integers(-9, 9, (3, 4, 5))
    check("ReduceSum", {"x": x}, {"a": ints(1)}, {"keepdims": 0}, out_types=[I64])
    check("ReduceMax", {"x": x}, attrs={"axes": [0, 2]}, out_types=[I64])


# ---- LayerNormalization -------------------------------------------------------------
@pytest.mark.parametrize("shape,axis,bias,n_out", [
    ((3, 4, 5), -1, True, 1), ((3, 4, 5), 1, True, 3), ((2, 7), 0, False, 1),
    ((2, 3, 4, 5), -2, False, 2), ((6, 9), 1, True, 1),
])
def test_layer_norm(shape, axis, bias, n_out):
    norm = shape[axis:] if axis >= 0 else shape[len(shape) + axis:]
    consts = {"s": rand(*norm, seed=1)}
    if bias:
        consts["b"] = rand(*norm[-1:], seed=2)  # broadcast along the trailing axis only
    check("LayerNormalization", {"x": rand(*shape, high=3.0)}, consts,
          {"axis": axis, "epsilon": 1e-3}, n_outputs=n_out)


# ---- Small graphs through the NHWC layout pass ---------------------------------------
def _conv(x_name, out, cin, cout, consts, seed):
    consts[f"{out}_w"] = rand(cout, cin, 3, 3, seed=seed)
    consts[f"{out}_b"] = rand(cout, seed=seed + 1)
    return helper.make_node("Conv", [x_name, f"{out}_w", f"{out}_b"], [out], pads=[1, 1, 1, 1])


def test_conv_reducemean_matmul_softmax():
    consts = {"axes": ints(2, 3), "w": rand(6, 4, seed=5)}
    nodes = [_conv("x", "c", 3, 6, consts, 1),
             helper.make_node("ReduceMean", ["c", "axes"], ["r"], keepdims=0),
             helper.make_node("MatMul", ["r", "w"], ["m"]),
             helper.make_node("Softmax", ["m"], ["y"], axis=-1)]
    x = rand(2, 3, 7, 5)
    model = graph_model(nodes, {"x": x}, {"y": np.float32}, consts, opset=18)
    check_model(model, {"x": x})


@pytest.mark.parametrize("keepdims", [1, 0])
def test_conv_slice_concat_argmax(keepdims):
    consts = {"s0": ints(0), "e0": ints(3), "ax": ints(1), "s1": ints(7), "e1": ints(2),
              "st1": ints(-2)}
    nodes = [_conv("x", "c", 3, 8, consts, 1),
             helper.make_node("Slice", ["c", "s0", "e0", "ax"], ["a"]),
             helper.make_node("Slice", ["c", "s1", "e1", "ax", "st1"], ["b"]),
             helper.make_node("Concat", ["b", "a", "c"], ["cat"], axis=-3),
             helper.make_node("ArgMax", ["cat"], ["y"], axis=1, keepdims=keepdims)]
    x = rand(2, 3, 6, 5)
    model = graph_model(nodes, {"x": x}, {"y": I64}, consts)
    _, engine = check_model(model, {"x": x})
    if keepdims:  # NHWC from the conv to the output: one transpose in, one out
        assert op_types(engine).count("Transpose") == 2


def test_conv_axis_ops_stay_nhwc():
    """Split, Tile, Slice, ReduceMax, Expand, Cast and Where after a conv all run in NHWC."""
    consts = {"sp": ints(2, 3), "rep": ints(1, 1, 1, 2), "s0": ints(0), "e0": ints(BIG),
              "st0": ints(3), "last": ints(-1), "rax": ints(1), "shp": ints(1, 3, 1, 1),
              "s1": ints(1), "e1": ints(-1), "zero": np.float32(0.0)}
    nodes = [_conv("x", "c", 3, 5, consts, 1),                                     # (2,5,4,6)
             helper.make_node("Split", ["c", "sp"], ["p", "q"], axis=1),           # 2 + 3 ch
             helper.make_node("Tile", ["p", "rep"], ["t"]),                        # (2,2,4,12)
             helper.make_node("Slice", ["t", "s0", "e0", "last", "st0"], ["ts"]),  # (2,2,4,4)
             helper.make_node("ReduceMax", ["ts", "rax"], ["tm"], keepdims=1),     # (2,1,4,4)
             helper.make_node("Expand", ["tm", "shp"], ["te"]),                    # (2,3,4,4)
             helper.make_node("Slice", ["q", "s1", "e1", "last"], ["qs"]),         # (2,3,4,4)
             helper.make_node("Greater", ["qs", "zero"], ["g"]),
             helper.make_node("Cast", ["g"], ["gf"], to=1),
             helper.make_node("Where", ["g", "te", "gf"], ["y"])]
    x = rand(2, 3, 4, 6)
    model = graph_model(nodes, {"x": x}, {"y": np.float32}, consts, opset=18)
    _, engine = check_model(model, {"x": x})
    assert op_types(engine).count("Transpose") == 2

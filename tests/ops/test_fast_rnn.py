"""The fast LSTM and GRU (mace/ops/fast/lstm.py, gru.py: one packed GEMM for every step's input
projection, the recurrence in a compiled loop) against onnxruntime and against the reference
kernels: directions, layouts, sequence lengths, initial states, peepholes, clip, GRU's
linear_before_reset; NaN, an empty sequence."""
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from mace import onnx_backend
from mace.ops.fast._jit import op_loops
from mace.runtime.engine import Engine
from tests.ops.onnx_case import make_model, rand
from tests.ops.onnx_graph import IR_VERSION
from tests.ops.test_onnx_rnn_ops import check_rnn

pytestmark = pytest.mark.skipif(op_loops("_rnn_loops") is None, reason="no numba: the references run")
DIRS = {"forward": 1, "reverse": 1, "bidirectional": 2}
GATES = {"LSTM": 4, "GRU": 3}


def _case(op, direction, seq, batch, inp, hidden, layout=0, seed=0, peepholes=False):
    d, g = DIRS[direction], GATES[op]
    x = rand(*((batch, seq, inp) if layout else (seq, batch, inp)), seed=seed, low=-2, high=2)
    state = (batch, d, hidden) if layout else (d, batch, hidden)
    inputs = {"x": x, "h0": rand(*state, seed=seed + 1)}
    weights = {"W": rand(d, g * hidden, inp, seed=seed + 2), "R": rand(d, g * hidden, hidden, seed=seed + 3),
               "B": rand(d, 2 * g * hidden, seed=seed + 4)}
    order = ["x", "W", "R", "B", "", "h0"]
    if op == "LSTM":
        inputs["c0"] = rand(*state, seed=seed + 5)
        order.append("c0")
        if peepholes:
            weights["P"] = rand(d, 3 * hidden, seed=seed + 6)
            order.append("P")
    return inputs, weights, order


def _rnn_tag(engine) -> str:
    (node,) = [n for n in engine.nodes if n.op.type in GATES]
    return node.tag


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("seq,batch,inp,hidden", [(1, 1, 3, 4), (16, 1, 96, 64), (9, 3, 5, 7)])
def test_fast_rnn_matches_onnxruntime(op, direction, layout, seq, batch, inp, hidden):
    inputs, weights, order = _case(op, direction, seq, batch, inp, hidden, layout, peepholes=True)
    attrs = {"hidden_size": hidden, "direction": direction, "layout": layout}
    engine = check_rnn(op, inputs, weights, attrs, 3 if op == "LSTM" else 2, order)
    assert _rnn_tag(engine) == "cpu:fast"


@pytest.mark.parametrize("linear_before_reset", [0, 1])
@pytest.mark.parametrize("clip", [0.0, 0.6])
def test_fast_gru_reset_forms_and_clip_match_onnxruntime(linear_before_reset, clip):
    inputs, weights, order = _case("GRU", "bidirectional", 6, 2, 5, 8)
    attrs = {"hidden_size": 8, "direction": "bidirectional", "linear_before_reset": linear_before_reset,
             **({"clip": clip} if clip else {})}   # onnxruntime refuses clip=0
    engine = check_rnn("GRU", inputs, weights, attrs, 2, order)
    assert _rnn_tag(engine) == "cpu:fast"


def test_fast_lstm_clip_and_full_sequence_lens_match_onnxruntime():
    inputs, weights, order = _case("LSTM", "forward", 7, 2, 4, 5, peepholes=True)
    weights["lens"] = np.full(2, 7, np.int32)
    order[4] = "lens"
    engine = check_rnn("LSTM", inputs, weights, {"hidden_size": 5, "clip": 0.7}, 3, order)
    assert _rnn_tag(engine) == "cpu:fast"


def _engines(op, inputs, weights, order, attrs, n_outputs):
    model = make_model(op, inputs, weights, attrs, n_outputs, 14, order)
    model.ir_version = min(model.ir_version, IR_VERSION)
    fast = onnx_backend.prepare(model, inputs)
    ref = Engine(fast.graph, options={"reference_kernels": True})
    assert _rnn_tag(fast) == "cpu:fast" and _rnn_tag(ref) == "cpu"
    return model, fast, ref


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
@pytest.mark.parametrize("threads", [1, 2])
def test_fast_rnn_agrees_with_the_reference_kernel(op, threads):
    """Within a few float32 ulp: the projection's sums and the recurrent product follow the
    reference's order; sigmoid and tanh are rounded from float64 (the reference: float32 tanh)."""
    inputs, weights, order = _case(op, "bidirectional", 12, 3, 20, 16, peepholes=True)
    with threadpool_limits(threads):
        _, fast, ref = _engines(op, inputs, weights, order, {"hidden_size": 16, "direction": "bidirectional"},
                                GATES[op] - 1)
        got, want = fast.run(inputs), ref.run(inputs)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=0, atol=2e-6)


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_nan_in_one_step_passes_on_as_in_the_reference(op):
    inputs, weights, order = _case(op, "forward", 6, 2, 3, 4, peepholes=True)
    inputs["x"][2, 1, 0] = np.nan   # batch row 1 from step 2 on; row 0 untouched
    _, fast, ref = _engines(op, inputs, weights, order, {"hidden_size": 4}, GATES[op] - 1)
    got, want = fast.run(inputs), ref.run(inputs)
    for name in want:
        assert np.array_equal(np.isnan(got[name]), np.isnan(want[name]))
        np.testing.assert_allclose(got[name], want[name], rtol=0, atol=2e-6)
    y = got[fast.graph.output_names[0]]
    assert np.isnan(y[2:, :, 1]).all() and not np.isnan(y[:, :, 0]).any()


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_an_empty_batch_gives_empty_outputs(op):
    """batch 0: Y and the last states are empty, as the reference kernel's (onnxruntime 1.32
    aborts the process on it)."""
    inputs, weights, order = _case(op, "bidirectional", 4, 0, 3, 5, peepholes=True)
    _, fast, ref = _engines(op, inputs, weights, order, {"hidden_size": 5, "direction": "bidirectional"},
                            GATES[op] - 1)
    got, want = fast.run(inputs), ref.run(inputs)
    assert {k: v.shape for k, v in got.items()} == {k: v.shape for k, v in want.items()}
    assert all(v.size == 0 for v in got.values())


@pytest.mark.parametrize("half", [True, False], ids=["sigmoid", "tanh"])
def test_the_gates_squash_is_within_a_few_ulp(half):
    """The recurrence's float32 sigmoid / tanh (_rnn_loops._squash) against float64 over the
    whole range and its edges: within 2.3 ulp (numpy's float32 tanh is within 1.4), NaN kept,
    infinities and large values saturated exactly, -0.0 kept by tanh; at offsets into a buffer,
    as the loops call it."""
    lib = op_loops("_rnn_loops")
    x = np.concatenate([np.linspace(-40, 40, 400_001), np.geomspace(1e-38, 1, 20_000),
                        -np.geomspace(1e-38, 1, 20_000), [0.39999, 0.4, 0.40001, 87.5, -88.5, 1e30, -1e30],
                        [np.inf, -np.inf, np.nan, 0.0, -0.0]]).astype(np.float32)
    buf = np.concatenate([np.full(5, 7.0, np.float32), x, np.full(3, 7.0, np.float32)])
    lib._squash(buf, 5, x.size, half)
    got = buf[5:5 + x.size]
    assert np.all(buf[:5] == 7) and np.all(buf[-3:] == 7)   # only its slice
    wide = x.astype(np.float64)
    with np.errstate(over="ignore"):
        want = 1 / (1 + np.exp(-wide)) if half else np.tanh(wide)
    finite = np.isfinite(x) & (np.abs(want) > np.finfo(np.float32).tiny)
    ulps = np.abs(got[finite] - want[finite]) / np.spacing(np.abs(want[finite]).astype(np.float32))
    assert ulps.max() <= 2.3
    edges = got[-5:]
    assert np.isnan(edges[2])
    if half:
        assert list(edges[[0, 1, 3, 4]]) == [1.0, 0.0, 0.5, 0.5]
    else:
        assert list(edges[[0, 1]]) == [1.0, -1.0] and np.signbit(edges[4]) and edges[3] == 0

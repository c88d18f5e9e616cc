"""Observer API: events, node info, intermediate values, weight replacement and relocation."""
from __future__ import annotations

import numpy as np
import pytest

from mace.runtime.observer import (Event, iter_nodes, node_info, register, relocate_weights, replace_weight,
                                   unregister)
from tests.report.helpers import conv2d_nhwc, converted_digits, digits_session


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return converted_digits(tmp_path_factory.mktemp("observer"))


@pytest.fixture
def session(digits):
    return digits_session(*digits)  # a fresh engine per test: some tests change weights


def test_event_order_and_counts(session):
    engine = session.engine
    n = len(engine.nodes)
    events = []
    handle = register(engine, lambda flags, node: events.append((flags, node.index)), Event.ALL)
    # INIT comes at registration, once per node, FIRST/LAST on the ends
    assert [i for _, i in events] == list(range(n))
    assert all(f & Event.INIT for f, _ in events)
    assert events[0][0] & Event.FIRST and events[-1][0] & Event.LAST
    assert not any(f & (Event.FIRST | Event.LAST) for f, _ in events[1:-1])
    events.clear()
    engine.run(session.inputs)
    assert len(events) == 2 * n
    assert [i for _, i in events] == [i for i in range(n) for _ in (0, 1)]
    assert [bool(f & Event.BEFORE) for f, _ in events] == [True, False] * n
    assert [bool(f & Event.AFTER) for f, _ in events] == [False, True] * n
    assert [f for f, _ in events if f & Event.FIRST] == [Event.BEFORE | Event.FIRST, Event.AFTER | Event.FIRST]
    assert [f for f, _ in events if f & Event.LAST] == [Event.BEFORE | Event.LAST, Event.AFTER | Event.LAST]
    assert unregister(engine, handle) and not unregister(engine, handle)
    events.clear()
    engine.run(session.inputs)
    assert events == [] and engine.observers == []


def test_flags_select_events_and_callbacks_run_in_order(session):
    engine = session.engine
    seen = []
    register(engine, lambda f, node: seen.append(("a", node.index)), Event.AFTER)
    second = register(engine, lambda f, node: seen.append(("b", node.index)), Event.AFTER)
    engine.run(session.inputs)
    assert seen[:2] == [("a", 0), ("b", 0)] and len(seen) == 2 * len(engine.nodes)
    unregister(engine, second)
    seen.clear()
    engine.run(session.inputs)
    assert [who for who, _ in seen] == ["a"] * len(engine.nodes)


def test_node_info_walks_the_graph_without_running(session):
    engine = session.engine
    calls = []
    engine.observers.append(lambda *a: calls.append(a))
    infos = list(iter_nodes(engine))
    assert calls == []  # nothing ran
    assert [i.index for i in infos] == list(range(len(engine.nodes)))
    assert [i.type for i in infos] == [op.type for op in engine.graph.net.op]
    conv1 = infos[0]
    assert conv1.type == "Conv2D" and conv1.framework_ops == ("conv1", "bn1", "relu1")
    assert [t.kind for t in conv1.inputs] == ["input"] and conv1.inputs[0].shape == (1, 8, 8, 1)
    assert [t.shape for t in conv1.weights] == [(8, 1, 3, 3), (8,)]
    assert conv1.outputs[0].shape == (1, 8, 8, 8) and conv1.outputs[0].dtype == np.float32
    assert conv1.outputs[0].scale is None and conv1.outputs[0].zero_point is None  # float model
    assert conv1.scratch and all(t.kind == "scratch" and t.nbytes > 0 for t in conv1.scratch)
    assert node_info(engine, len(engine.nodes)) is None and node_info(engine, -1) is None


def test_quantized_activations_carry_scale_and_zero_point(session):
    engine = session.engine
    engine.graph.net.op[0].quantize_info.add(scale=0.05, zero_point=128)  # as a quantized model says
    conv1, conv2 = list(iter_nodes(engine))[:2]
    assert conv1.outputs[0].scale == pytest.approx(0.05) and conv1.outputs[0].zero_point == 128
    assert conv2.inputs[0].scale == pytest.approx(0.05) and conv2.inputs[0].zero_point == 128


def test_intermediate_values_equal_a_hand_run(session):
    engine = session.engine
    seen = {}
    register(engine, lambda f, node: seen.update({t.name: np.array(t.data) for t in node.outputs}),
             Event.AFTER)
    out = engine.run(session.inputs)
    conv1, conv2, _, fc, _ = list(iter_nodes(engine))
    x = session.inputs["image"].astype(np.float64)
    relu1 = np.maximum(conv2d_nhwc(x, conv1.weights[0].data, conv1.weights[1].data, 1, 1), 0)
    np.testing.assert_allclose(seen["relu1"], relu1, rtol=1e-5, atol=1e-5)
    relu2 = np.maximum(conv2d_nhwc(relu1, conv2.weights[0].data, conv2.weights[1].data, 2, 1), 0)
    np.testing.assert_allclose(seen["relu2"], relu2, rtol=1e-5, atol=1e-5)
    # fold_flatten_transpose permuted the FC weight to read the NHWC tensor as it is
    flat = relu2.reshape(1, -1)
    logits = flat @ fc.weights[0].data.T + fc.weights[1].data
    np.testing.assert_allclose(seen["logits"], logits, rtol=1e-4, atol=1e-4)
    prob = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    np.testing.assert_allclose(out["prob"], prob, rtol=1e-5, atol=1e-6)


def _fc(engine):
    return next(i for i in iter_nodes(engine) if i.type == "FullyConnected")


def test_replacing_weights_changes_the_output_as_expected(session):
    engine = session.engine
    before = engine.run(session.inputs)
    logits_of = {}
    register(engine, lambda f, node: logits_of.update({node.index: np.array(node.outputs[0].data)}),
             Event.AFTER)
    fc = _fc(engine)
    engine.run(session.inputs)
    logits = logits_of[fc.index]
    w, b = fc.weights
    rebuilt = replace_weight(engine, w.name, np.ascontiguousarray(w.data * 2))
    assert rebuilt == [fc.index]
    replace_weight(engine, b.name, np.ascontiguousarray(b.data * 2))
    after = engine.run(session.inputs)
    np.testing.assert_allclose(logits_of[fc.index], 2 * logits, rtol=1e-5)  # no activation on fc
    assert not np.allclose(after["prob"], before["prob"])
    with pytest.raises(ValueError, match="the model.s is float32"):
        replace_weight(engine, w.name, np.zeros((3, 3), np.float32))


def test_relocated_weights_run_from_the_new_buffer(session):
    engine = session.engine
    before = engine.run(session.inputs)
    fc = _fc(engine)
    cache = np.zeros(sum(w.nbytes for w in fc.weights) + 256, np.uint8)  # the "fast memory"
    moved = relocate_weights(engine, fc.index, cache)
    assert [m.name for m in moved] == [w.name for w in fc.weights]
    for m in moved:
        assert np.shares_memory(m.data, cache) and m.data.ctypes.data % 64 == 0
    np.testing.assert_array_equal(engine.run(session.inputs)["prob"], before["prob"])
    with pytest.raises(ValueError, match="too small"):
        relocate_weights(engine, fc.index, np.zeros(16, np.uint8))


def test_weights_replaced_from_a_before_callback_apply_to_that_run(session):
    engine = session.engine
    fc = _fc(engine)
    bias = fc.weights[1]
    zeros_w = np.zeros(fc.weights[0].shape, np.float32)

    def zero_fc(flags, node):
        if node.index == fc.index:
            replace_weight(engine, fc.weights[0].name, zeros_w)
            replace_weight(engine, bias.name, np.full(bias.shape, 3.0, np.float32))

    register(engine, zero_fc, Event.BEFORE)
    out = engine.run(session.inputs)
    np.testing.assert_allclose(out["prob"], np.full((1, 10), 0.1), rtol=1e-6)  # equal logits

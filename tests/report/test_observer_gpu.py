"""The observer API on the OpenCL runtime (PoCL on CI): same events, tensors read back from images."""
from __future__ import annotations

import numpy as np
import pytest

from mace.runtime.engine import Engine
from mace.runtime.observer import Event, iter_nodes, register
from mace.validate.divergence import compare_runtimes
from tests.report.helpers import converted_digits, digits_session


@pytest.fixture(scope="module")
def gpu_session(tmp_path_factory):
    try:
        from mace.runtime.gpu import unavailable_reason
    except ImportError as e:
        pytest.skip(f"no GPU runtime in this checkout: {e}")
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"no OpenCL device for the GPU runtime: {reason}")
    session = digits_session(*converted_digits(tmp_path_factory.mktemp("gpu")))
    return session, Engine(session.engine.graph, device="gpu")


def _outputs_seen(engine, inputs) -> tuple:
    events, values = [], {}

    def seen(flags, node):
        events.append((flags, node.index))
        if flags & Event.AFTER:
            values.update({t.name: np.array(t.data) for t in node.outputs})

    handle = register(engine, seen, Event.BEFORE | Event.AFTER)
    engine.run(inputs)
    return events, values, handle


def test_events_and_intermediate_values_on_the_gpu(gpu_session):
    session, gpu = gpu_session
    assert any(n.tag == "gpu" for n in gpu.nodes)
    events, on_gpu, _ = _outputs_seen(gpu, session.inputs)
    n = len(gpu.nodes)
    assert [i for _, i in events] == [i for i in range(n) for _ in (0, 1)]
    assert events[0][0] == Event.BEFORE | Event.FIRST and events[-1][0] == Event.AFTER | Event.LAST
    _, on_cpu, _ = _outputs_seen(session.engine, session.inputs)
    assert set(on_gpu) == set(on_cpu)
    for name, value in on_cpu.items():  # images mapped back to host arrays in the stored layout
        assert on_gpu[name].shape == value.shape
        np.testing.assert_allclose(on_gpu[name], value, rtol=2e-2, atol=2e-2 * max(1, np.abs(value).max()))
    info = list(iter_nodes(gpu))[0]
    assert info.kernel == "gpu" and info.framework_ops == ("conv1", "bn1", "relu1")


def test_gpu_agrees_with_cpu_layer_by_layer(gpu_session):
    session, gpu = gpu_session
    v = compare_runtimes(gpu, session.engine, session.inputs, 0.995, "gpu", "digits_cnn")
    assert v.passed and len(v.checks) == len(gpu.nodes)

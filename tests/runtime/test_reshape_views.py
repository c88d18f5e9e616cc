"""A fast float Reshape's output is a view of its input's buffer (Engine._reshape_views): no copy,
no step, its source kept alive as long as the view is read; the outputs are the reference
engine's (which copies) over runs whose buffers are reused."""
import numpy as np
import pytest

from mace.runtime.engine import Engine
from tests.ops.ir_graph import graph_of

RNG = np.random.default_rng(3)


def _graph():
    """x -> Relu a -> Reshape r (a view) -> Reshape r2 (a view of a) read at the very end, while
    a long Tanh chain on x reuses the arena: a's buffer must outlive its last view."""
    ops = [("Activation", ["x"], ["a"], {"activation": "RELU"}),
           ("Reshape", ["a"], ["r"], {"dims": [4, 6]}),
           ("Reshape", ["r"], ["r2"], {"dims": [24]}),
           ("Activation", ["x"], ["t0"], {"activation": "TANH"})]
    for i in range(1, 6):
        ops.append(("Activation", [f"t{i - 1}"], [f"t{i}"], {"activation": "TANH"}))
    ops += [("Reshape", ["t5"], ["t5f"], {"dims": [24]}),
            ("Eltwise", ["r2", "t5f"], ["y"], {"type": "SUM"}),
            ("Reshape", ["x"], ["xr"], {"dims": [6, 4]})]   # a graph input viewed, as a model output
    return graph_of({"x": (2, 3, 4)}, ops, outputs=("y", "xr", "r"))


def test_reshapes_are_views_without_steps():
    engine, ref = Engine(_graph()), Engine(_graph(), options={"reference_kernels": True})
    assert engine.views == {"r": "a", "r2": "a", "t5f": "t5", "xr": "x"}
    assert not ref.views   # the reference Reshape copies
    reshapes = {n.index for n in engine.nodes if n.op.type == "Reshape"}
    assert not reshapes & set(engine._program_nodes)   # no call left for any of them
    for name, src in engine.views.items():
        assert np.shares_memory(engine.buffers[name], engine.buffers[src])
    planned = set(engine.plan.offsets)
    assert not planned & set(engine.views) and {"a", "t5", "x"} <= planned
    for k in range(3):   # reused buffers: each run's inputs differ
        x = RNG.normal(size=(2, 3, 4)).astype(np.float32)
        got, want = engine.run({"x": x}), ref.run({"x": x})
        for name in ("y", "xr", "r"):
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"{name} run {k}")
        np.testing.assert_array_equal(got["xr"], x.reshape(6, 4))


@pytest.mark.parametrize("options", [{"reference_kernels": True}, {"num_threads": 2, "split_small_runs": True}])
def test_outputs_are_copies_not_views(options):
    """run() hands out copies: a viewed buffer the next run overwrites does not change them."""
    engine = Engine(_graph(), options=options)
    x1, x2 = (RNG.normal(size=(2, 3, 4)).astype(np.float32) for _ in range(2))
    first = engine.run({"x": x1})
    engine.run({"x": x2})
    np.testing.assert_array_equal(first["xr"], x1.reshape(6, 4))

"""The engine's in-place concat: convs on the packed GEMM write straight into their channel
slice of a Concat's output, the Concat copies only the rest (mace/runtime/engine.py
_in_place_concats); results, memory plan, observers and rebuilt kernels stay right."""
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from mace.ops.fast import _jit
from mace.runtime.engine import Engine

from tests.ops.ir_graph import graph_of
from tests.ops.test_fast_kernels import close

pytestmark = pytest.mark.skipif(_jit.loops() is None, reason="numba is not installed: no packed GEMM")

RNG = np.random.default_rng(21)
NHWC = dict(data_format="NHWC")


def conv(name, x, o, k, c, act="RELU"):
    w = RNG.standard_normal((o, c, k, k)).astype(np.float32) / np.sqrt(c * k * k)
    args = dict(NHWC, strides=[1, 1], dilations=[1, 1], pads=[k // 2] * 4, group=1, activation=act)
    return ("Conv2D", [x, name + "_w", name + "_b"], [name], args), \
        {name + "_w": w, name + "_b": RNG.standard_normal(o).astype(np.float32)}


def fire(extra_use=False, pooled=True, output_branch=False, act="RELU"):
    """x -> squeeze 1x1 -> (expand 1x1, expand 3x3, [max pool]) -> concat -> 2x -> y, a fire module
    with an Inception-like pool branch; optionally one branch also used elsewhere."""
    ops, consts = [], {}
    for op, const in [conv("s", "x", 16, 1, 12), conv("e1", "s", 32, 1, 16, act), conv("e3", "s", 24, 3, 16, act)]:
        ops.append(op)
        consts.update(const)
    branches = ["e1", "e3"]
    if pooled:
        ops.append(("Pooling", ["s"], ["p"], dict(NHWC, pooling_type="MAX", kernels=[3, 3], strides=[1, 1],
                                                  pads=[1, 1, 1, 1])))
        branches.append("p")
    ops.append(("Concat", branches, ["cat"], dict(NHWC, axis=3)))
    ops.append(("Eltwise", ["cat", "cat"], ["y"], dict(NHWC, type="SUM")))   # y = 2 cat
    outputs = ["y"]
    if extra_use:
        ops.append(("Eltwise", ["e1", "e1"], ["z"], dict(NHWC, type="SUM")))
        outputs.append("z")
    if output_branch:
        outputs.append("e3")
    return graph_of({"x": (1, 24, 20, 12)}, ops, consts, outputs)


def both(graph):
    x = RNG.standard_normal((1, 24, 20, 12)).astype(np.float32)
    fast, ref = Engine(graph), Engine(graph, options={"reference_kernels": True})
    return fast, fast.run({"x": x}), ref.run({"x": x})


@pytest.mark.parametrize("act", ["RELU", "HARDSWISH", "SIGMOID"])
@pytest.mark.parametrize("threads", [1, 2])
def test_convs_write_into_the_concat_and_it_copies_only_the_rest(threads, act):
    """Any fused activation (HARDSWISH, SIGMOID: the packed GEMM's store step) as well as a clip."""
    with threadpool_limits(threads):
        engine, got, want = both(fire(act=act))
    assert set(engine.aliases) == {"e1", "e3"}
    assert engine.aliases["e3"] == ("cat", 32)
    close(got["y"], want["y"])
    concat = next(n for n in engine.nodes if n.op.type == "Concat")
    assert np.shares_memory(engine.buffers["e3"], engine.buffers["cat"])
    # the aliased tensors have no arena space of their own
    assert "e1" not in engine.plan.offsets and "e3" not in engine.plan.offsets
    assert engine.plan.arena_size >= engine.plan.lower_bound
    assert concat.inputs[0].base is not None


def test_a_tensor_used_elsewhere_or_returned_keeps_its_own_buffer():
    engine, got, want = both(fire(extra_use=True, output_branch=True, pooled=False))
    assert engine.aliases == {}
    for name in ("y", "z", "e3"):
        close(got[name], want[name])


def test_observers_see_the_aliased_tensors():
    """An observer reading e3 after its node ran gets the conv's output (a view into cat)."""
    graph = fire()
    x = RNG.standard_normal((1, 24, 20, 12)).astype(np.float32)
    seen = []
    for engine in (Engine(graph), Engine(graph, options={"reference_kernels": True})):
        def observer(when, node, eng):
            if when == "after" and node.op.output[0] == "e3":
                seen.append(np.array(eng.buffers["e3"]))
        engine.observers.append(observer)
        engine.run({"x": x})
    assert "e3" in Engine(graph).aliases
    close(seen[0], seen[1])


def test_a_rebuilt_producer_still_writes_in_place():
    """replace_const (the observer API's weight relocation) rebuilds e3's kernel: it binds
    to its slice of cat again."""
    graph = fire()
    engine = Engine(graph)
    w = graph.consts["e3_w"] * 2
    engine.replace_const("e3_w", w)
    ref = Engine(graph, options={"reference_kernels": True})
    x = RNG.standard_normal((1, 24, 20, 12)).astype(np.float32)
    close(engine.run({"x": x})["y"], ref.run({"x": x})["y"])
    assert "e3" in engine.aliases

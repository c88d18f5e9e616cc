"""One kernel check: `check(ctx) -> reason | None` (mace/ops/registry.py), asked by the engine at
load, by the quantize pass and by GPU placement at convert; a node that falls back from its
preferred kernel says why."""
import numpy as np
import pytest

from mace.ops import registry
from mace.ops.fast import _jit
from mace.ops.registry import CONVERT, LOAD, Kernel, choose_kernel, graph_context, kernel_check
from mace.runtime.engine import Engine
from tests.ops.ir_graph import graph_of

OLD_CHECKS = ("accepts", "supports", "unsupported")


def _kernel_classes():
    registry._load_all()
    for op_type, spec in registry.all_ops().items():
        for tag, cls in spec.kernels.items():
            yield op_type, tag, cls


def test_no_kernel_class_defines_the_old_checks():
    """`accepts` (bool), `supports(op, graph)` and `unsupported(op, shapes, dtypes, consts)` are gone:
    every kernel class (and each class it inherits from) says whether it takes a node with `check`."""
    found = sorted({f"{klass.__module__}.{klass.__qualname__}.{name}"
                    for _, _, cls in _kernel_classes() for klass in cls.__mro__ for name in OLD_CHECKS
                    if name in vars(klass)})
    assert not found, found


def test_every_check_is_callable_or_none():
    for op_type, tag, cls in _kernel_classes():
        assert cls.check is None or callable(cls.check), (op_type, tag)
    assert Kernel.check is None


def _dilated_conv(act="PRELU"):
    rng = np.random.default_rng(0)
    consts = {"w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
              "b": np.zeros(4, np.float32), "s": np.full(4, 0.1, np.float32)}
    return graph_of({"x": (1, 8, 8, 3)}, [
        ("Conv2D", ["x", "w", "b", "s"], ["c"], dict(data_format="NHWC", padding="SAME", activation=act)),
        ("Softmax", ["c"], ["y"], {"axis": 1})], consts)


def test_the_same_check_at_convert_and_at_load():
    """A context built from the graph (convert) and the engine's (load) get the same answer."""
    graph = graph_of({"x": (2, 3), "z": (2, 2)}, [("Concat", ["x", "z"], ["y"], {"axis": 1})])
    graph.specs["x"] = ((2, 3), np.dtype(np.int32))
    graph.specs["z"] = ((2, 2), np.dtype(np.int32))
    graph.specs["y"] = ((2, 5), np.dtype(np.int32))
    op = graph.net.op[0]
    fast = registry.spec("Concat").kernels["cpu:fast"]
    at_convert = kernel_check(fast, graph_context(graph, op, CONVERT))
    assert at_convert is not None and at_convert == kernel_check(fast, graph_context(graph, op, LOAD))
    cls, tag, declined = choose_kernel("Concat", graph_context(graph, op, LOAD), ["cpu:fast", "cpu"])
    assert tag == "cpu" and declined == (("cpu:fast", at_convert),)


def test_a_declined_node_keeps_its_reasons():
    if _jit.loops() is None:
        pytest.skip("without numba every fast kernel declines with the same reason")
    graph = graph_of({"x": (1, 8, 8, 3)}, [("LayerNorm", ["x", "g", "b"], ["y"], {"axis": 1})],
                     {"g": np.ones((8, 8, 3), np.float32), "b": np.zeros((8, 8, 3), np.float32)})
    engine = Engine(graph)
    node = engine.nodes[0]
    assert node.tag == "cpu" and node.declined == (("cpu:fast", "axis 1 is not the last"),)
    assert engine.kernel_fallbacks() == [f"{node.op.name} (LayerNorm) runs cpu: cpu:fast: axis 1 is not the last"]


def test_reasons_are_words_not_booleans():
    """The old bool accepts became reasons: a declined node never says True / False / 'not accepted'."""
    graph = graph_of({"x": (1, 4, 4, 3)}, [("Activation", ["x", "s"], ["y"], {"activation": "PRELU"})],
                     {"s": np.full((4, 4, 3), 0.2, np.float32)})
    engine = Engine(graph)
    for node in engine.nodes:
        for tag, reason in node.declined:
            assert isinstance(reason, str) and reason and reason not in ("True", "False", "not accepted")
    if _jit.act_loops() is not None:
        assert engine.nodes[0].declined == (
            ("cpu:fast", "PRELU slope is not a constant of one value or one per channel"),)


def test_quantize_plan_and_gpu_placement_ask_check():
    from mace.ops.gpu.support import gpu_reason
    from mace.transform.passes.quantize import quantize_plan
    graph = _dilated_conv()
    conv = graph.net.op[0]
    assert quantize_plan(graph)[conv.name] == "fused activation PRELU has no quantized form (RELU/RELUX only)"
    assert gpu_reason(conv, graph) == "activation PRELU has no GPU form"


def test_a_float_node_of_a_quantized_model_says_why_once():
    """The int8 kernels decline a float node for one reason: the line names both tags once."""
    from mace.ir.args import set_arg
    from tests.runtime.kernel_choice_cases import float_graphs, quantized
    graph = float_graphs()["chain"]
    for op in graph.net.op:   # its SIGMOID quantizes (a 256-entry table): GELU has no int8 form
        if op.type == "Activation":
            set_arg(op, "activation", "GELU")
    engine = Engine(quantized(graph))
    lines = [line for line in engine.kernel_fallbacks() if "(Activation)" in line]
    assert lines == ["Activation__1 (Activation) runs cpu:fast: int8:fast, int8: input 0 is float32, "
                     "not quantized uint8"] or _jit.loops() is None, lines

"""What the engine asks of the fast CPU kernels at load, so it knows none of their details.

    FAST_TAG                        the registry tag of these kernels ("cpu:fast")
    INT8_FAST_TAG                   the fast int8 kernels' ("int8:fast", mace/ops/fast/int8)
    ComputeContext                  an engine's threads and wait policy (mace/ops/fast/compute.py):
                                    the engine makes one and its kernels get it as `ctx.compute`
    reference_blas(nodes)           the nodes whose reference kernel does BLAS work (each gets
                                    OpenBLAS's threads for its own step; the rest stay on the pool)
    bind_step(node, scratch, compute)  bind one node with the engine's ComputeContext; says whether
                                    the step landed on the compute pool
    in_place_concats(graph, nodes)  Concat inputs their producers can write straight into the
                                    Concat's output (a channel slice): {tensor: (output, channel)}
    direct(step)                    a bound step calling its compiled loop's machine code without
                                    numba's dispatcher, once that code exists
    chained(calls, owners)          runs of such steps as one compiled call each (mace/ops/fast/chain.py)

The compute pool behind the context (mace/ops/fast/_pool.py) stays private to this package.
"""
from __future__ import annotations

import collections
from functools import partial

from mace.ops.fast._aot import as_step
from mace.ops.fast.chain import chained  # noqa: F401 (the engine's program takes it from here)
from mace.ops.fast.compute import SMALL_RUN_MACS, ComputeContext  # noqa: F401 (the engine takes them from here)

from mace.ir.runtimes import FAST_TAG, INT8_FAST_TAG  # noqa: F401 (importers take the tags from here too)
POOLED_TAGS = (FAST_TAG, INT8_FAST_TAG)   # kernels that may bind steps onto the compute pool


def direct(step):
    """`step`, a partial of a numba dispatcher, as a partial of the machine code the dispatcher
    picks for these very arguments (the dispatcher resolves their types on every call: ~0.2 us,
    as much as a small step's work); a partial of a loop served ahead of time (MACE_AOT=1), as
    a partial of its export for these types. `step` itself when it is anything else, or when no code
    for these types is compiled yet (then the dispatcher compiles it as it would have)."""
    func = getattr(step, "func", None)
    if type(step) is not partial or step.keywords:
        return step
    ahead = as_step(step)   # a loop of the library built ahead: its export for these types
    if ahead is not None:
        return ahead
    if not hasattr(func, "overloads"):
        return step
    try:
        compiled = func.overloads.get(tuple(func.typeof_pyval(a) for a in step.args))
    except Exception:   # an argument numba cannot type: the dispatcher would refuse it too
        return step
    return step if compiled is None else partial(compiled.entry_point, *step.args)


def uses_reference_blas(node) -> bool:
    """A reference kernel doing BLAS work (a declined MatMul, Einsum, ...)."""
    return node.tag not in POOLED_TAGS and getattr(node.kernel, "uses_blas", False)


def reference_blas(nodes) -> list:
    """The nodes of `nodes` whose reference kernel does BLAS work."""
    return [n for n in nodes if uses_reference_blas(n)]


def bind_step(node, scratch, compute):
    """(the node's zero-argument step, the pool session its runs need or None), bound with
    ComputeContext `compute` (the engine's, which its kernels got at setup). A reference
    BLAS kernel's step runs with OpenBLAS's own threads even inside a session (the pool
    holds OpenBLAS at one thread): only that op gets them, the fast kernels around it stay
    on the pool."""
    need = node.kernel.scratch_nbytes
    pool = compute.pool
    made = pool.made if pool else 0
    step = node.kernel.bind(node.inputs, node.outputs, scratch[:need] if need else None)
    if pool is None:
        return step, None
    if uses_reference_blas(node):
        return compute.with_blas_threads(step), None
    # a step on the compute pool: each run is a pool session (OpenBLAS held at one thread meanwhile)
    session = compute.session() if node.tag in POOLED_TAGS and pool.made > made else None
    return step, session


def in_place_concats(graph, nodes) -> dict:
    """Concat inputs their producers can write straight into the Concat's output (a channel
    slice, NHWC): {tensor: (Concat output, first channel)}. The Concat then copies only its
    other inputs (SqueezeNet's expand convs, Inception's branches: no copy). Only for a fast
    channel Concat of float tensors, an input used by nothing else and not a graph input or
    output, made by a kernel that says it writes such a slice (`strided_output`: the
    packed-GEMM convs). The caller decides where it applies (CPU engines of float models)."""
    made_by = {t: node for node in nodes for t in node.op.output}
    uses = collections.Counter(t for op in graph.net.op for t in op.input)
    outside = set(graph.input_names) | set(graph.output_names) | set(graph.consts)
    aliases = {}
    for node in nodes:
        if node.op.type != "Concat" or node.tag != FAST_TAG or len(node.op.output) != 1:
            continue
        out = node.op.output[0]
        shape = graph.specs[out][0]
        if out in outside or getattr(node.kernel, "axis", None) != len(shape) - 1:
            continue
        start = 0
        for name in node.op.input:
            producer = made_by.get(name)
            if (producer is not None and name not in outside and uses[name] == 1
                    and getattr(producer.kernel, "strided_output", False)):
                aliases[name] = (out, start)
            start += graph.shape(name)[-1]  # a constant input has no spec, only a value
    return aliases

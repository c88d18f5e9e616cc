"""The engine: builds kernels and buffers once at load, then runs the graph.

    engine = create_engine("model.pb")          # or Engine(graph)
    outputs = engine.run({"input": array})       # dict name -> ndarray

Every intermediate tensor lives in one arena laid out by the memory planner;
graph inputs and outputs get buffers of their own so they survive the run.
Kernels come from the op registry by an ordered tag list: "cpu:fast" (mace/ops/fast)
before "cpu", the numpy reference; a quantized graph's "int8:fast" before "int8" ahead of
them (options {"reference_kernels": True} keeps to the references).
Each node is bound once at load to a zero-argument callable over its buffers, so
a run is a loop of calls. Kernels that need scratch (im2col, padding) share one
region sized for the largest request, `engine.scratch`, apart from the arena.
Observers (callables) see every node before and after it runs.
Threads: the engine owns a ComputeContext (`engine.compute`, mace/ops/fast/compute.py), made
from its options {"num_threads", "cpu_wait_policy"} or passed in, and hands it to every
kernel through its KernelContext (`ctx.compute`). Where fast kernels bound steps onto the
compute pool, each run is that context's session: OpenBLAS held at one thread, numba's
OpenMP threads splitting the work at the context's width.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from pathlib import Path

import numpy as np

from mace.ir.runtimes import GPU_RUNTIMES, INT8_TAGS, QUANTIZED_ONLY, RUNTIMES
from mace.errors import MaceError, ModelError, RuntimeInputError
from mace.ir.args import get_arg
from mace.ir.graph import Graph
from mace.ir.model_io import load_model, release_weight_pages
from mace.ir.opstats import run_macs, streamed_weight
from mace.ir.ragged import ragged_outputs
from mace.ops.fast.binding import (FAST_TAG, INT8_FAST_TAG, SMALL_RUN_MACS, ComputeContext, bind_step,
                                   in_place_concats)
from mace.ops.registry import LOAD, Kernel, choose_kernel, declined_line, graph_context
from mace.ops.variable import Variables
from mace.proto import pb
from mace.util.aligned import aligned_empty, aligned_zeros
from mace.runtime.gpu.runtime import GpuRuntime
from mace.runtime import program
from mace.runtime.branches import branches
from mace.runtime.memory_planner import MemoryPlan, plan_memory, tensor_lives
from mace.runtime.node import Node
from mace.runtime.resize import check_recorded_shapes, check_shapes, reshaped_graph, varies

# Kernel variants per runtime, in the order tried (mace/ir/runtimes.py): "cpu:fast" before
# "cpu"; quantized "int8:fast" (mace/ops/fast/int8) before "int8", the exact reference
# (mace/ops/int8), each taking only nodes whose tensors are quantized (their check), so the float ops of a
# quantized model (e.g. a float head) fall through to "cpu". The OpenCL runtimes' CPU-placed ops
# use the "cpu" tags.
INT8_TAG = INT8_TAGS[-1]
DEVICE_TAGS = {n: list(r.kernel_tags) for n, r in RUNTIMES.items()}
FAST_TAGS = (FAST_TAG, INT8_FAST_TAG)   # what options {"reference_kernels": True} leaves out
GPU_DEVICES = GPU_RUNTIMES


class Engine:
    def __init__(self, graph: Graph, device: str = "cpu", options: dict | None = None,
                 compute: ComputeContext | None = None):
        self.graph = graph
        self.device = device
        self.options = options or {}
        # threads and wait policy of this engine's runs, read once here (MACE_NO_POOL too); a
        # model whose whole run is a few million multiply-adds runs on one thread (for_run)
        self._macs = run_macs(graph)
        self.compute = compute or ComputeContext.from_options(self.options).for_run(
            self._macs, streamed_weight(graph))
        self.observers = []
        # the graph's names are protobuf fields: a run reads these tuples instead (~1 us each)
        self._input_names = tuple(graph.input_names)
        self._output_names = tuple(graph.output_names)
        self._session = None   # set by _bind when a step runs on the compute pool
        self.quantized = is_quantized(graph)
        self.tags, self.cpu_tags = kernel_tags(graph, device, self.options)
        self.gpu = _gpu_runtime(self) if device in GPU_DEVICES else None  # ops placed on the GPU
        self.aliases = {}   # tensor -> (Concat output, first channel): see _in_place_concats
        self.views = {}     # Reshape output -> the tensor whose buffer it views: see _reshape_views
        self.variables = Variables()   # state kept between runs (ReadVariable / AssignVariable)
        self.plan = self._plan()
        self.arena = _arena(self.plan.arena_size)
        self.buffers = self._bind_buffers()
        self.nodes = [self._built(i, op) for i, op in enumerate(graph.net.op)]
        self.aliases = self._in_place_concats()
        self.views = self._reshape_views()
        if self.aliases or self.views:   # planned again without the aliased tensors, the nodes re-pointed
            self.plan = self._plan()
            self.arena = _arena(self.plan.arena_size)
            self.buffers = self._bind_buffers()
            for node in self.nodes:
                node.inputs = [self._tensor(t) for t in node.op.input]
                node.outputs = [self.buffers[t] for t in node.op.output]
        self.scratch = self._scratch_region()
        self._set_steps([self._bind(node) for node in self.nodes])
        if self.gpu:
            self.gpu.ready(self.nodes)
            release_weight_pages(graph.consts)   # uploaded: the host copy need not stay resident

    # ---- load ----------------------------------------------------------
    def _built(self, index: int, op) -> Node:
        """The op's node; then its weights' mapped pages may go: a kernel that packed them never
        reads them again, and the packed and mapped copies were both resident (docs/memory.md).
        Pages a kernel does read again fault back in from the page cache."""
        node = self._build_node(index, op)
        release_weight_pages({t: self.graph.consts[t] for t in op.input if t in self.graph.consts})
        return node

    def tensor_lives(self) -> list:
        """Lifetimes of every non-constant tensor in execution order."""
        return tensor_lives(self.graph)

    def _plan(self) -> MemoryPlan:
        lives = self.tensor_lives()
        if self.gpu:  # tensors only the GPU touches need no host memory
            lives = self.gpu.host_lives(lives)
        if self.aliases:   # a Concat's output lives from its first producer's step
            first = {life.name: life.first for life in lives}
            for name, (out, _) in self.aliases.items():
                first[out] = min(first[out], first[name])
            lives = [dataclasses.replace(life, first=first[life.name]) for life in lives
                     if life.name not in self.aliases]
        if self.views:     # a viewed tensor lives as long as its views are read
            last = {life.name: life.last for life in lives}
            for out, src in self.views.items():
                last[src] = max(last[src], last[out])
            lives = [dataclasses.replace(life, last=last[life.name]) for life in lives
                     if life.name not in self.views]
        return plan_memory(lives)

    def _bind_buffers(self) -> dict:
        bufs = {}
        for name, offset in self.plan.offsets.items():
            shape, dtype = self.graph.specs[name]
            bufs[name] = np.ndarray(shape, dtype=dtype, buffer=self.arena, offset=offset)
        for name, (out, start) in self.aliases.items():
            width = self.graph.specs[name][0][-1]
            bufs[name] = bufs[out][..., start:start + width]
        for out, src in self.views.items():   # in execution order: a view's source is bound first
            bufs[out] = bufs[src].reshape(self.graph.specs[out][0])
        return bufs

    def _in_place_concats(self) -> dict:
        """{tensor: (Concat output, first channel)} a producer writes in place (ops/fast/binding.py)."""
        if self.gpu or self.quantized or self.device != "cpu":
            return {}
        return in_place_concats(self.graph, self.nodes)

    def _reshape_views(self) -> dict:
        """{Reshape output: the tensor it views}: a fast float Reshape (the same bytes in the same
        order) of an arena tensor reads its input's buffer instead of copying it, its step none
        (ReshapeFast.bind sees the shared buffer). A view of a view names the first tensor. Not
        where a Concat places the input (a channel slice: not contiguous), nor on the GPU or
        the int8 engines, whose kernels keep their own buffers."""
        if self.gpu or self.quantized or self.device != "cpu":
            return {}
        views = {}
        for node in self.nodes:
            op = node.op
            if op.type != "Reshape" or node.tag != FAST_TAG or len(op.output) != 1 or not op.input:
                continue
            src, out = op.input[0], op.output[0]
            if src in self.graph.consts or src in self.aliases or src not in self.graph.specs \
                    or out in self.graph.input_names:
                continue
            views[out] = views.get(src, src)
        return views

    def _tensor(self, name: str) -> np.ndarray:
        if name in self.graph.consts:
            return self.graph.consts[name]
        return self.buffers[name]

    def _build_node(self, index: int, op) -> Node:
        """The op's node; any failure names the op (a damaged .pb reaches here only past
        mace/ir/checks.py, so what is left is an op whose args or shapes do not fit)."""
        try:
            return self._make_node(index, op)
        except MaceError:
            raise
        except Exception as e:
            raise ModelError(f"cannot prepare op '{op.name}' ({op.type}): {e}") from e

    def _make_node(self, index: int, op) -> Node:
        if self.gpu and self.gpu.runs(op):
            return self.gpu.build_node(index, op)
        ins = [self._tensor(t) for t in op.input]
        ctx = graph_context(self.graph, op, LOAD, self.options, self.variables, self.quantized, self.compute)
        # the first kernel in tag order whose check(ctx) takes the node; the others' reasons kept
        cls, tag, declined = choose_kernel(op.type, ctx, self.cpu_tags if op.device_type == pb.CPU else self.tags)
        return Node(index, op, cls(ctx), tag, ins, [self.buffers[t] for t in op.output], declined)

    def kernel_fallbacks(self) -> list:
        """One line per node that a kernel earlier in tag order declined, with its reason
        (`conv1 (Conv2D) runs cpu: cpu:fast: dilation 2`): `run --vlog_level 2` prints them."""
        return [declined_line(n.op, n.tag, n.declined) for n in self.nodes if getattr(n, "declined", ())]

    def _scratch_region(self) -> np.ndarray:
        """One uint8 buffer for every kernel's scratch: ops run one at a time."""
        size = max([getattr(n.kernel, "scratch_nbytes", 0) for n in self.nodes
                    if isinstance(n.kernel, Kernel)] + [0])
        return aligned_empty(size)   # on a cache line, as the arena's tensors

    def _bind(self, node):
        try:
            return self._bind_node(node)
        except MaceError:
            raise
        except Exception as e:
            raise ModelError(f"cannot prepare op '{node.op.name}' ({node.op.type}): {e}") from e

    def _bind_node(self, node):
        if not isinstance(node.kernel, Kernel):  # e.g. a GPU node's staged kernel
            return functools.partial(node.kernel.run, node.inputs, node.outputs)
        step, session = bind_step(node, self.scratch, self.compute)
        if session is not None and self._session is None:
            self._session = session   # each run is then a compute pool session
        return step

    def _set_steps(self, steps: list) -> None:
        """The bound step of each node, and the program a run calls (mace/runtime/program.py):
        the same steps, those of a run-time If's branches (mace/runtime/branches.py) each behind
        its condition. Observers and the GPU runtime run every step (an observer sees every
        node; a GPU node's condition is on the device)."""
        self._steps = steps
        found = [] if self.gpu else branches(self.graph)
        self._program, self._program_nodes = program.build(steps, found, self._tensor)
        self._calls = (self._program, self._program_nodes)   # as built: what `_chain` chains
        self._outputs = tuple((n, self._tensor(n)) for n in self._output_names)
        self._tight = False   # the first run calls numba's dispatchers, then `program.tightened`
        self._chain_in = self._chain_after()   # runs left before `_chain`; None: never
        self.skippable_ops = sum(len(b.ops) for b in found)

    def _chain_after(self) -> int | None:
        """After how many runs the steps are chained (mace/ops/fast/chain.py: one compiled call
        for each run of compiled steps), or None: never. Only a CPU engine whose whole run is
        below SMALL_RUN_MACS (where calls are a large share of a run) or whose steps split across
        the compute pool's threads (each split step a parallel region of its own otherwise), and
        only after options {"chain_after_runs"} runs (CHAIN_AFTER_RUNS; negative: never): a chain
        costs 0.1-0.5 s of compiling the first time on a machine (a parallel one 1-3 s;
        loaded from numba's cache after), which a model run a few times, as most tests and
        one-off runs do, would not win back."""
        after = int(self.options.get("chain_after_runs", CHAIN_AFTER_RUNS))
        if self.gpu or self.device != "cpu" or after < 0:
            return None
        if self._macs >= SMALL_RUN_MACS and self._chain_width() < 2:
            return None
        return max(after, 1)   # the first run is what makes the loops' machine code known

    def _chain_width(self) -> int:
        """Threads a parallel chain splits into: the pool's width where steps run on it, else 1."""
        return self.compute.width() if self._session is not None and self.compute.active() else 1

    def _chain(self) -> None:
        calls, owners = program.chained(*self._calls, width=self._chain_width())
        self._program, self._program_nodes = program.tightened(calls), owners

    @property
    def pooled(self) -> bool:
        """Whether runs are compute pool sessions (some step was bound onto the pool)."""
        return self._session is not None

    def session(self):
        """Context for calling the bound steps directly, as `run` does: the compute pool's
        session where the steps use it (`self.compute`'s), else nothing."""
        return self._session or contextlib.nullcontext()

    @property
    def scratch_bytes(self) -> int:
        return int(self.scratch.nbytes)

    def replace_const(self, name: str, value) -> list:
        """Make constant `name` the array `value` and rebuild the kernels that read it (they
        pre-pack weights at load); returns the rebuilt node indices. Used by the observer API
        (mace/runtime/observer.py) to relocate or replace weights; keep it working if run changes."""
        self.graph.consts[name] = value
        self.__dict__.get("_shape_states", {}).clear()   # other shapes' kernels packed the old one
        rebuilt = [n.index for n in self.nodes if name in n.op.input]
        for i in rebuilt:  # in place: a run in progress picks the new kernel up
            vars(self.nodes[i]).update(vars(self._build_node(i, self.nodes[i].op)))
        if any(getattr(self.nodes[i].kernel, "scratch_nbytes", 0) > self.scratch.nbytes
               for i in rebuilt):
            self.scratch = self._scratch_region()
            self._set_steps([self._bind(node) for node in self.nodes])
        else:
            for i in rebuilt:   # in place too: an observed run in progress looks steps up
                self._steps[i] = self._bind(self.nodes[i])
            self._set_steps(self._steps)
        return rebuilt

    # ---- shapes chosen at run time (mace/runtime/resize.py) ---------------
    def resize(self, shapes: dict) -> None:
        """Run inputs of these shapes from now on ({input: shape}; inputs not named keep theirs).
        Only dimensions the model declares variable change (input_shapes: -1..8,...), else a
        RuntimeInputError names the input and dimension. Shapes are inferred again, the arena
        planned and the kernels bound for them once per shape signature; going back to a shape
        seen before reuses that state (`resize_stats`). `run` resizes by itself."""
        states = self.__dict__.setdefault("_shape_states", {})
        base = self.__dict__.setdefault("_base_graph", self.graph)
        current = {n: tuple(s) for n, (s, _) in self.input_specs().items()}
        wanted = {**current, **{n: tuple(int(d) for d in s) for n, s in shapes.items()}}
        key, now = _signature(wanted, self._input_names), _signature(current, self._input_names)
        if key == now:
            return
        check_shapes(base, wanted)
        if self.device in RUNTIMES and RUNTIMES[self.device].fixed_shapes:
            raise RuntimeInputError(f"the {self.device} runtime runs the shapes the model was converted "
                                    f"at only; resizing runs on runtime cpu or gpu")
        states.pop(now, None)
        states[now] = self._shape_state()   # the shape left: used more recently than the rest
        stats = self.resize_stats
        if key not in states:
            states[key] = self._engine_at(_reshaped(base, wanted))._shape_state()
            stats["planned"] += 1
        else:
            stats["reused"] += 1
        states[key] = states.pop(key)   # most recently used last
        while len(states) > max(int(self.options.get("shape_cache", SHAPE_CACHE)), 1):
            del states[next(iter(states))]   # each kept shape holds its arena and packed weights
        vars(self).update(states[key])

    def _engine_at(self, graph: Graph) -> "Engine":
        """This model's engine for `graph` (its shapes inferred again), sharing the state kept
        between runs: a streaming model's variables do not start over when the shape changes."""
        other = Engine(graph, self.device, self.options, self.compute)
        # its kernels look the values up in their store at run time (mace/ops/variable.py)
        other.variables.values, other.variables.initial = self.variables.values, self.variables.initial
        return other

    @property
    def resize_stats(self) -> dict:
        """{'planned': shapes planned and bound by resize, 'reused': resizes to a shape seen before}."""
        return self.__dict__.setdefault("_resize_stats", {"planned": 0, "reused": 0})

    def _shape_state(self) -> dict:
        """What the engine holds per shape signature: every attribute but the engine-wide ones."""
        return {k: v for k, v in vars(self).items() if k not in _ENGINE_WIDE}

    def _follow_shapes(self, inputs: dict, specs: dict) -> dict:
        """Resize to the inputs' shapes where the model declares variable dimensions."""
        if not varies(self.graph) or set(inputs) != set(specs):
            return specs
        shapes = {n: tuple(np.shape(inputs[n])) for n in specs}
        if all(shapes[n] == tuple(s) for n, (s, _) in specs.items()):
            return specs
        self.resize(shapes)
        return self.input_specs()

    # ---- run -----------------------------------------------------------
    def input_specs(self) -> dict:
        return {n: self.graph.specs[n] for n in self.graph.input_names}

    def output_specs(self) -> dict:
        return {n: self.graph.specs[n] for n in self.graph.output_names}

    def set_inputs(self, inputs: dict) -> None:
        buffers = self.buffers
        if len(inputs) == len(self._input_names):   # fast path: the usual, valid call
            try:
                for name in self._input_names:
                    value, buf = inputs[name], buffers[name]
                    if value.shape != buf.shape or value.dtype is not buf.dtype and \
                            value.dtype != buf.dtype and not _widens(value.dtype, buf.dtype):
                        break
                    buf[...] = value   # 3x less overhead than copyto
                else:
                    return
            except (KeyError, AttributeError, TypeError, ValueError):
                pass   # the checks below say what is wrong
        specs = self.input_specs()
        unknown = set(inputs) - set(specs)
        if unknown:
            raise RuntimeInputError(f"unknown input tensor(s) {sorted(unknown)}; "
                                    f"the model's inputs are {sorted(specs)}")
        specs = self._follow_shapes(inputs, specs)
        for name, (shape, _) in specs.items():
            if name not in inputs:
                raise RuntimeInputError(f"missing input tensor '{name}' (shape {list(shape)})")
            value = np.asarray(inputs[name])
            if tuple(value.shape) != tuple(shape):
                raise RuntimeInputError(f"input tensor '{name}': expected shape {list(shape)}, "
                                        f"got {list(value.shape)}")
            np.copyto(self.buffers[name], exact_input(name, value, self.buffers[name].dtype), casting="unsafe")

    def reset_state(self) -> None:
        """Variables (a streaming model's state) back to their initial values, as when loaded."""
        self.variables.reset()

    def run(self, inputs: dict) -> dict:
        """Run once; returns a fresh dict of output arrays (copies). A model with variables
        (ReadVariable / AssignVariable) starts from the state the previous run left."""
        self.set_inputs(inputs)
        session = self._session
        if session is not None:
            session.__enter__()
        try:
            if self.observers:
                self._run_observed()
            else:
                calls = self._program
                if len(calls) == 1:   # a chained small model: one call, ~0.2 us less than
                    try:              # the loop (a wake-word model's run is ~4 us)
                        calls[0]()
                    except Exception as e:
                        raise self._step_error(0, e) from e
                else:
                    self._run_steps()
                if not self._tight:   # every loop has run once: its machine code is known
                    self._program, self._tight = program.tightened(self._program), True
                if self._chain_in is not None:
                    self._chain_in -= 1
                    if self._chain_in <= 0:
                        self._chain_in = None
                        self._chain()
        finally:
            if session is not None:
                session.__exit__()
        outputs = {}
        for n, buf in self._outputs:   # a loop, not a comprehension: ~0.1 us less a run
            outputs[n] = buf.copy()
        return self._cut_ragged(outputs) if self._ragged else outputs

    @functools.cached_property
    def _ragged(self) -> dict:
        """{output: (length tensor, axis)} of the outputs whose length depends on the data."""
        return ragged_outputs(self.graph.net)

    def _cut_ragged(self, outputs: dict) -> dict:
        """Outputs whose length depends on the data, cut to the length the run wrote
        (mace/ir/ragged.py); the buffers keep the planned upper bound."""
        for name, (length, axis) in self._ragged.items():
            n = int(self._tensor(length).reshape(-1)[0])
            outputs[name] = outputs[name][(slice(None),) * axis + (slice(0, n),)].copy()
        return outputs

    def _run_steps(self) -> None:
        step = -1
        try:
            for step, fn in enumerate(self._program):
                fn()
        except Exception as e:
            raise self._step_error(step, e) from e

    def _step_error(self, step: int, e: Exception) -> ModelError:
        """The error of program call `step` failing with `e`, naming its node (a chain says
        which of its steps ran last)."""
        index = self._program_nodes[step]
        node = self.nodes[self._program[step].at if index is None else index]
        return ModelError(f"op '{node.op.name}' ({node.op.type}) failed: {e}")

    def _run_observed(self) -> None:
        observers, steps = self.observers, self._steps
        for node in self.nodes:
            for obs in observers:
                obs("before", node, self)
            try:
                steps[node.index]()   # looked up now: an observer may have rebuilt the node
            except Exception as e:
                raise ModelError(f"op '{node.op.name}' ({node.op.type}) failed: {e}") from e
            for obs in observers:
                obs("after", node, self)


# runs of a small model before its steps are chained (Engine._chain_after)
CHAIN_AFTER_RUNS = 16
# shapes whose plan and kernels resize keeps (options {"shape_cache": N}), least recently used
# dropped first: a sequence model fed every length from 1 to 512 would otherwise keep 512 arenas
SHAPE_CACHE = 8
# what resize keeps across shapes (mace/runtime/resize.py): the rest is per shape signature
_ENGINE_WIDE = frozenset({"observers", "options", "device", "variables", "_shape_states", "_base_graph",
                          "_resize_stats", "compute"})


def _reshaped(graph: Graph, shapes: dict) -> Graph:
    """reshaped_graph, its failure said as the caller's (inputs that do not fit each other)."""
    try:
        return reshaped_graph(graph, shapes)
    except ModelError as e:
        given = ", ".join(f"'{n}' {list(s)}" for n, s in shapes.items())
        raise RuntimeInputError(f"inputs {given} do not fit together: {e} (dimensions declared with the "
                                f"same range in the deployment file usually move together)") from None


def _signature(shapes: dict, names) -> tuple:
    return tuple(tuple(shapes[n]) for n in names)


def _widens(have: np.dtype, want: np.dtype) -> bool:
    """Any real number into a float input (float64 or ints into float32: what callers mean)."""
    return want.kind == "f" and have.kind in "fiub"


def exact_input(name: str, value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`value` for an input of `dtype`: as it is where nothing is lost (any real number into a
    float input; an integer or float array into an integer one when every value is a whole
    number in its range), else a RuntimeInputError naming the input. numpy's own cast would
    truncate 2.7 to 2 and wrap 3e9 around: a wrong answer with no word said."""
    dtype = np.dtype(dtype)
    if value.dtype == dtype or _widens(value.dtype, dtype):
        return value
    where = f"input tensor '{name}' is {dtype}"
    if dtype.kind not in "iub" or value.dtype.kind not in "iubf":
        raise RuntimeInputError(f"{where}: {value.dtype} values cannot be converted to it")
    if value.size == 0:
        return value
    if value.dtype.kind == "f":
        bad = ~np.isfinite(value) | (value != np.floor(value))
        if bad.any():
            raise RuntimeInputError(f"{where}: got {value.dtype} values that are not whole numbers "
                                    f"(e.g. {value[bad].flat[0].item()}); pass {dtype} (converted only when no "
                                    f"value changes)")
    lo, hi = (0, 1) if dtype.kind == "b" else (np.iinfo(dtype).min, np.iinfo(dtype).max)
    low, high = value.min().item(), value.max().item()   # Python numbers: exact comparisons
    if low < lo or high > hi:
        raise RuntimeInputError(f"{where}: got {value.dtype} values outside its range {lo}..{hi} "
                                f"(e.g. {low if low < lo else high!r}); pass {dtype}")
    return value.astype(dtype)


def kernel_tags(graph: Graph, device: str = "cpu", options: dict | None = None) -> tuple:
    """(tags, cpu_tags): the kernel tags an engine on `device` tries for the graph's ops, in
    order, and for its ops placed on the CPU."""
    tags = list(DEVICE_TAGS.get(device, [device, "cpu"]))
    if is_quantized(graph) and INT8_TAG not in tags:
        tags = list(INT8_TAGS) + tags
    # a dsp model with cpu groups (placed at convert, e.g. quantize_target_cosine's float ops):
    # the ops placed on the CPU fall through to the float kernels after the int8 ones
    cpu_tags = (tags + DEVICE_TAGS["cpu"]
                if device in QUANTIZED_ONLY and get_arg(graph.net, "op_placement", 0) else tags)
    if (options or {}).get("reference_kernels"):
        tags = [t for t in tags if t not in FAST_TAGS]
        cpu_tags = [t for t in cpu_tags if t not in FAST_TAGS]
    return tags, cpu_tags


def kernel_fallbacks(graph: Graph, device: str = "cpu", options: dict | None = None) -> list:
    """The lines `Engine.kernel_fallbacks` would give, predicted from the graph alone (convert
    time, no engine): each op not placed on the GPU whose preferred kernels decline it, with
    their reasons. An op no kernel takes is left to the engine to report."""
    tags, cpu_tags = kernel_tags(graph, device, options)
    quantized, lines = is_quantized(graph), []
    for op in graph.net.op:
        if device in GPU_DEVICES and op.device_type == pb.GPU:
            continue
        try:
            ctx = graph_context(graph, op, LOAD, options, None, quantized)
            _, tag, declined = choose_kernel(op.type, ctx, cpu_tags if op.device_type == pb.CPU else tags)
        except Exception:   # a malformed op: the engine names it at load
            continue
        if declined:
            lines.append(declined_line(op, tag, declined))
    return lines


def is_quantized(graph: Graph) -> bool:
    """Set by the quantize pass (mace/transform/passes/quantize.py) on the nets it rewrote."""
    return bool(get_arg(graph.net, "quantize", 0))


def _gpu_runtime(engine):
    return GpuRuntime(engine)   # pyopencl itself loads only when the runtime starts (gpu/context.py)


def _arena(nbytes: int) -> np.ndarray:
    """The tensor arena, refused up front when it cannot fit in this machine's memory (a damaged
    shape in a .pb asks for terabytes; np.zeros would fail late or the OOM killer would act)."""
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):   # no sysconf (Windows): numpy's own error
        physical = None
    if physical and nbytes > physical:
        raise ModelError(f"the model's tensors need {nbytes / 2**30:.1f} GiB, more than this "
                         f"machine's {physical / 2**30:.1f} GiB of memory (a damaged .pb? re-run convert)")
    try:
        return aligned_zeros(nbytes)   # every tensor at a multiple of 64 bytes from a cache line
    except MemoryError:
        raise ModelError(f"cannot allocate {nbytes / 2**30:.1f} GiB for the model's tensors") from None


def create_engine(pb_path, data_path=None, device: str = "cpu", options: dict | None = None) -> Engine:
    """Load a converted model (.pb + .data) and build an engine for it."""
    graph = load_model(Path(pb_path), Path(data_path) if data_path else None)
    check_recorded_shapes(graph, pb_path)
    return Engine(graph, device=device, options=options)

"""The GPU side of an Engine: placement, images, transfers, programs, launches.

The Engine stays one engine: on device "gpu" / "cpu+gpu" it creates a GpuRuntime
and asks it three things: which tensors need host memory (`host_lives`), to
build the node of each op placed on the GPU (`runs` / `build_node`), and to
finish loading (`ready`: tuning, cache files). CPU ops are built and run as
always. Transfers ride on the GPU nodes (`Staged`): an input made on the host
is uploaded before its first GPU reader, and a GPU result that a CPU op or the
caller reads is downloaded right after it is made, so node order is run order.

Engine options read here: data_type, library + opencl_cache_dir (cache files),
opencl_tuning, limit_opencl_kernel_time, gpu_perf_hint, gpu_priority_hint,
gpu_range_check (count what fp16 storage clamps or flushes, per node: range_counts.py, and
what CPU ops and inputs hand to half images) and gpu_fp32_ops (op names that keep float images
in an fp16 model, added to those convert marked with the op argument `gpu_fp32`: the per-node
fallback of docs/gpu.md; a CPU op or a model input named there keeps its GPU readers in float).
"""
from __future__ import annotations

import functools
import time
from collections import defaultdict

import numpy as np

from mace.ir.args import get_arg
from mace.ops.gpu import support as placement
from mace.ops.gpu.images import GpuTensor, ImageLife, as_nhwc, channel_major_size, plan_images
from mace.ops.gpu.kernel import GpuKernelContext
from mace.ops.registry import select_kernel
from mace.runtime.gpu.device import GpuDevice
from mace.runtime.gpu.range_counts import KINDS, NodeCounts, RangeCounters, half_counts
from mace.runtime.gpu.transfer import Transfer
from mace.runtime.node import Node

FP32_ARG = "gpu_fp32"   # op argument convert sets on nodes that keep float storage on the GPU
FP32_REASON_ARG = "gpu_fp32_reason"   # and why (printed by run)
CHECKED_ARG = "gpu_fp16_checked"      # net argument: `gpu_fp32_ops: auto` measured the ops left in half


class GpuRuntime(GpuDevice):
    def __init__(self, engine):
        self.engine, self.graph = engine, engine.graph
        opts = engine.options
        data_type = opts.get("data_type") or get_arg(self.graph.net, "data_type", "") or "fp16_fp32"
        library = opts.get("library") or self.graph.net.name or "model"
        super().__init__(data_type, opts, library)
        self.reasons = self._place()
        self.transfer_log = None   # (tensor, "upload"|"download") -> [ms] while a benchmark asks
        self.on_gpu = {op.name for op in self.graph.net.op if op.device_type == placement.GPU}
        self.fp32_ops = self._fp32_ops(opts.get("gpu_fp32_ops") or ())
        self.uploads, self.downloads, self.host_readers = self._transfer_points()
        self.tensors, self.image_plan = self._allocate()
        self.counters = RangeCounters(self, len(self.on_gpu)) if self.range_check else None
        self.upload_counts = {}    # tensor -> counts of the last run's copy into a half image
        self._first_node = None

    # ---- engine hooks ------------------------------------------------------
    def runs(self, op) -> bool:
        return op.name in self.on_gpu

    def host_lives(self, lives: list) -> list:
        """The tensor lifetimes the host arena must hold (GPU-only tensors need none)."""
        made_on_gpu = {t for op in self.graph.net.op if op.name in self.on_gpu for t in op.output}
        keep = self.host_readers | set(self.graph.output_names)
        return [t for t in lives if t.name not in made_on_gpu or t.name in keep]

    def build_node(self, index: int, op):
        g = self.graph
        ins = [g.consts[t] if t in g.consts else self.tensors[t] for t in op.input]
        outs = [self.tensors[t] for t in op.output]
        ctx = GpuKernelContext(
            op=op, input_shapes=[tuple(x.shape) for x in ins],
            input_dtypes=[x.dtype if isinstance(x, np.ndarray) else np.dtype(g.specs[x.name][1])
                          for x in ins],
            output_shapes=[tuple(g.specs[t][0]) for t in op.output],
            output_dtypes=[np.dtype(g.specs[t][1]) for t in op.output],
            consts=[g.consts.get(t) for t in op.input], options=self.engine.options,
            gpu=self, tensors_in=ins, tensors_out=outs, fp32=op.name in self.fp32_ops,
            counters=functools.partial(self.counters.wrap, index=index) if self.counters else None)
        cls, tag = select_kernel(op.type, ["gpu"])
        try:
            kern = cls(ctx)
        except Exception as e:
            raise RuntimeError(f"cannot prepare op '{op.name}' ({op.type}) on the GPU: {e}") from e
        staged = Staged(self, kern, self.uploads.get(op.name, ()), self.downloads.get(op.name, ()))
        if self._first_node is None:
            self._first_node = staged.first = True   # it zeroes the range counters of a run
        return Node(index, op, staged, tag, ins, outs)

    # ---- fp16 range: the fallback and the counts -------------------------------
    def _fp32_ops(self, asked) -> set:
        """GPU ops that keep float storage: marked at convert, or named in the options (a CPU op
        or a model input named there: the GPU ops that read what it hands over)."""
        if not self.fp16:
            return set()
        asked = set(asked)
        handed = {t for op in self.graph.net.op if op.name in asked and op.name not in self.on_gpu
                  for t in op.output} | (asked & set(self.graph.input_names))
        return {op.name for op in self.graph.net.op if op.name in self.on_gpu
                and (op.name in asked or get_arg(op, FP32_ARG, 0) or handed.intersection(op.input))}

    def count_upload(self, name: str, data) -> None:
        """Range-count a host tensor as it is copied into a half image (range check on)."""
        self.upload_counts[name] = half_counts(data)

    def range_counts(self, nodes) -> list:
        """NodeCounts of the last run for every GPU node (the range check must be on)."""
        if self.counters is None:
            return []
        counts = self.counters.read()
        out = []
        for node in nodes:
            if node.index not in counts:
                continue
            values = sum(int(np.prod(self.graph.specs[t][0], dtype=np.int64)) for t in node.op.output)
            out.append(NodeCounts(node.index, node.op.name, node.op.type, values,
                                  node.op.name in self.fp32_ops, *counts[node.index], output=node.op.output[0]))
        return sorted(out + self._upload_counts(nodes), key=lambda c: c.index)

    def _upload_counts(self, nodes) -> list:
        """NodeCounts of what the last run copied from the host into half images, per producer
        (the CPU op that made the tensor, node index -1 for a model input)."""
        made_by = {t: node for node in nodes for t in node.op.output}
        out = {}
        for name, counts in self.upload_counts.items():
            node = made_by.get(name)
            key = (node.index, node.op.name, node.op.type) if node is not None else (-1, name, "input")
            c = out.setdefault(key, NodeCounts(*key, 0, False, output=name, uploaded=True))
            c.values += int(np.prod(self.graph.specs[name][0], dtype=np.int64))
            for kind, n in zip(KINDS, counts):
                setattr(c, kind, getattr(c, kind) + n)
        return list(out.values())

    def ready(self, nodes) -> None:
        """After every node is built: tune (if asked), write the cache files."""
        if self.tuner.tuning:
            for node in nodes:
                if isinstance(node.kernel, Staged):
                    node.kernel.kernel.enqueue()   # images hold garbage: only timings matter here
            self.queue.finish()
            self.tuner.save()
        self.programs.save()
        self.queue.finish()

    # ---- placement and memory ------------------------------------------------
    def _place(self) -> dict:
        ops = self.graph.net.op
        placed = get_arg(self.graph.net, "op_placement", 0)  # chosen per op at convert (placement.md)
        if not placed and not any(op.device_type == placement.GPU for op in ops):
            return placement.place(self.graph)   # converted for the CPU: place now
        reasons = {}
        for op in ops:
            reason = placement.gpu_reason(op, self.graph)
            if op.device_type != placement.GPU:
                reasons[op.name] = reason or "placed on CPU in the model"
            elif reason:   # e.g. a .pb from another release: run it where it can run
                op.device_type = placement.CPU
                reasons[op.name] = reason
        return reasons

    def summary(self) -> str:
        return placement.summary(self.graph, self.reasons)

    def _transfer_points(self):
        g, ops = self.graph, self.graph.net.op
        made_on_gpu = {t for op in ops if op.name in self.on_gpu for t in op.output}
        host_readers = {t for op in ops if op.name not in self.on_gpu for t in op.input}
        uploads, downloads, uploaded = defaultdict(list), defaultdict(list), set()
        outputs = set(g.output_names)
        for op in ops:
            if op.name not in self.on_gpu:
                continue
            for t in op.input:
                if t not in g.consts and t not in made_on_gpu and t not in uploaded:
                    uploads[op.name].append(t)
                    uploaded.add(t)
            downloads[op.name] = [t for t in op.output if t in outputs or t in host_readers]
        return uploads, downloads, host_readers

    def _allocate(self):
        g, ops = self.graph, self.graph.net.op
        first, last = {}, {}
        for i, op in enumerate(ops):
            if op.name not in self.on_gpu:
                continue
            for t in list(op.output) + [t for t in op.input if t not in g.consts]:
                first.setdefault(t, i)
                last[t] = i
        self.float_tensors = self._float_tensors()
        tensors, plans = {}, []
        for fp32 in (False, True):   # half and float images never share a block
            lives = [ImageLife(t, channel_major_size(as_nhwc(g.specs[t][0])), first[t], last[t])
                     for t in first if (t in self.float_tensors) == fp32]
            plan = plan_images(lives)
            blocks = [self.new_image(w, h, fp32) for w, h in plan.blocks]
            offset = sum(len(p.blocks) for p in plans)
            tensors.update({t.name: GpuTensor(t.name, tuple(g.specs[t.name][0]),
                                              blocks[plan.assignment[t.name]], offset + plan.assignment[t.name])
                            for t in lives})
            plans.append(plan)
        merged = plans[0]
        self.float_blocks = len(plans[1].blocks)   # the last ones: float images
        merged.blocks = plans[0].blocks + plans[1].blocks
        merged.tensor_pixels += plans[1].tensor_pixels
        return tensors, merged

    @property
    def image_bytes(self) -> int:
        """Bytes of the activation images: 4 channels of half or float per pixel."""
        blocks = self.image_plan.blocks
        half = blocks[:len(blocks) - self.float_blocks] if self.fp16 else []
        return sum(w * h * 8 for w, h in half) + sum(w * h * 16 for w, h in blocks[len(half):])

    def _float_tensors(self) -> set:
        """Tensors in float images in an fp16 model: the outputs of fp32 nodes, and uploaded
        (host-made) tensors they read, so nothing on their way is cut to half."""
        ops = [op for op in self.graph.net.op if op.name in self.fp32_ops]
        made_on_gpu = {t for op in self.graph.net.op if op.name in self.on_gpu for t in op.output}
        return {t for op in ops for t in op.output} | \
            {t for op in ops for t in op.input if t not in made_on_gpu and t not in self.graph.consts}


class Staged:
    """A GPU node's kernel with the transfers it carries (the engine runs it as any kernel)."""

    def __init__(self, runtime: GpuRuntime, kernel, uploads, downloads):
        self.runtime, self.kernel = runtime, kernel
        self.first = False
        tensors, fp32 = runtime.tensors, runtime.float_tensors
        self.uploads = [(t, Transfer(runtime, "nhwc", tensors[t].shape, tensors[t].image, True, t in fp32))
                        for t in uploads]
        # host values entering half images are counted as the GPU's own stores are
        self.counted = [t for t in uploads if t not in fp32] if runtime.counters else []
        self.downloads = [(t, Transfer(runtime, "nhwc", tensors[t].shape, tensors[t].image, False, t in fp32))
                          for t in downloads]

    def run(self, inputs, outputs):
        host, log = self.runtime.engine.buffers, self.runtime.transfer_log
        if self.first and self.runtime.counters:
            self.runtime.counters.reset()
            self.runtime.upload_counts.clear()
        for name in self.counted:
            self.runtime.count_upload(name, host[name])
        if log is not None:   # a benchmark times each transfer apart from the kernel
            return self._run_logged(inputs, outputs, host, log)
        for name, transfer in self.uploads:
            transfer.upload(host[name])
        self.kernel.run(inputs, outputs)
        for name, transfer in self.downloads:
            transfer.download(host[name])
        if self.runtime.engine.observers:   # per-op timings must see the work, not the enqueue
            self.runtime.queue.finish()

    def _run_logged(self, inputs, outputs, host, log):
        queue = self.runtime.queue
        for name, transfer in self.uploads:
            start = time.perf_counter()
            transfer.upload(host[name])
            queue.finish()
            log[(name, "upload")].append((time.perf_counter() - start) * 1000.0)
        self.kernel.run(inputs, outputs)
        queue.finish()
        for name, transfer in self.downloads:
            start = time.perf_counter()
            transfer.download(host[name])
            log[(name, "download")].append((time.perf_counter() - start) * 1000.0)

    def bind(self, inputs, outputs, scratch=None):
        """The engine's bound-call form (Kernel.bind): transfers included."""
        return functools.partial(self.run, inputs, outputs)

    def __getattr__(self, name):
        return getattr(self.__dict__["kernel"], name)

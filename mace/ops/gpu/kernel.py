"""The base of every OpenCL op kernel (registered under the tag "gpu").

A GPU kernel is an ordinary registry Kernel whose context also carries the
runtime and the GpuTensors it reads and writes, so `setup` binds images once
and `run` only enqueues. `check(ctx)` (the one kernel check, mace/ops/registry.py)
says why an op cannot run on the GPU (None: it can); the placement pass asks it of a
context built from the graph (`graph_context`), and an op it refuses stays on the CPU. Nothing here imports pyopencl: op modules load
everywhere, the device is only touched when an engine runs on "gpu".
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mace.ir.args import get_arg
from mace.ops.gpu.images import as_nhwc, channel_major_size
from mace.ops.registry import Kernel, KernelContext

# Fused activation codes; the order of the ACT_* defines in cl/common.cl.
ACTIVATIONS = ("", "RELU", "RELUX", "CLIP", "LEAKYRELU", "SIGMOID", "TANH", "ELU", "HARDSIGMOID",
               "HARDSWISH", "GELU", "GELU_TANH", "SOFTPLUS", "SOFTSIGN", "SELU", "MISH")
MAX_IMAGE_SIZE = 16384   # the 2-D image limit of common mobile GPUs; larger tensors stay on CPU
FLOAT = np.dtype(np.float32)


@dataclass
class GpuKernelContext(KernelContext):
    gpu: object = None                            # the GpuRuntime
    tensors_in: list = field(default_factory=list)   # GpuTensor, or ndarray for constants
    tensors_out: list = field(default_factory=list)
    fp32: bool = False         # float storage for this node in an fp16 model (per-node fallback)
    counters: object = None    # the node's range-check counters (None: not counting)


def tensors(ctx) -> tuple:
    """(op, shapes, dtypes, constants) of ctx's inputs then outputs (an output's constant: None):
    what the GPU checks go through."""
    return (ctx.op, list(ctx.input_shapes) + list(ctx.output_shapes),
            list(ctx.input_dtypes) + list(ctx.output_dtypes), list(ctx.consts) + [None] * len(ctx.output_shapes))


def i32(*values) -> list:
    return [np.int32(v) for v in values]


def act_code(kind: str) -> int:
    # PRELU reads a slope tensor: the Activation kernel handles it apart from these codes
    return ACTIVATIONS.index("" if kind in (None, "NOOP", "PRELU") else kind)


def act_args(ctx) -> list:
    """(code, alpha, limit) for a fused activation, as kernel arguments."""
    kind = ctx.arg("activation", "")
    alpha, limit = ctx.arg("activation_coefficient", 0.0), ctx.arg("max_limit", 0.0)
    if kind == "SELU":
        limit = ctx.arg("beta", 0.0)
    return [np.int32(act_code(kind)), np.float32(alpha), np.float32(limit)]


def fusable(op) -> str | None:
    kind = get_arg(op, "activation", "")
    return None if kind in ACTIVATIONS or kind == "NOOP" else f"activation {kind} has no GPU form"


def image_fits(size) -> bool:
    return 0 < size[0] <= MAX_IMAGE_SIZE and 0 < size[1] <= MAX_IMAGE_SIZE


class GpuKernel(Kernel):
    """Subclasses implement `prepare(ctx)` (build, upload, bind) and `enqueue()`."""

    # float32 activations of rank <= 4 only; subclasses add their own limits
    @classmethod
    def check(cls, ctx) -> str | None:
        _, shapes, dtypes, consts = tensors(ctx)
        for shape, dtype, const in zip(shapes, dtypes, consts):
            if const is not None:
                continue
            if np.dtype(dtype) != FLOAT:
                return f"{np.dtype(dtype)} tensors stay on the CPU"
            if len(shape) > 4:
                return f"rank {len(shape)} tensors have no image layout"
            if not image_fits(channel_major_size(as_nhwc(shape))):
                return "tensor too large for a 2-D image"
        return None

    def setup(self, ctx):
        self.gpu = ctx.gpu
        self.ins, self.outs = ctx.tensors_in, ctx.tensors_out
        self.owned = []   # images made here: kernel arguments do not keep them alive
        self.fp32, self.counters = ctx.fp32, ctx.counters
        self.prepare(ctx)

    def prepare(self, ctx):
        raise NotImplementedError

    def run(self, inputs, outputs):
        self.enqueue()

    def enqueue(self):
        raise NotImplementedError

    # ---- helpers ---------------------------------------------------------
    def kernel(self, program: str, name: str):
        kern = self.gpu.kernel(program, name, self.fp32)
        # with the range check on, the kernel also gets this node's counter slot
        return self.counters(kern) if self.counters else kern

    def launch(self, kern, name: str, gws):
        self.gpu.launch(kern, name, tuple(int(g) for g in gws))

    def image_in(self, i: int, layout: str = "nhwc"):
        """Input i's image; a constant input is uploaded once, here."""
        t = self.ins[i]
        if isinstance(t, np.ndarray):
            return self.upload(t, layout)
        return t.image

    def upload(self, array, layout: str):
        return self.own(self.gpu.upload_const(array, layout, self.fp32))

    def scratch(self, width: int, height: int, fp32: bool = False):
        """An image of this kernel's own (intermediate results)."""
        return self.own(self.gpu.new_image(width, height, fp32 or self.fp32))

    def own(self, image):
        self.owned.append(image)
        return image

    def dummy(self):
        """A 1x1 image for unused image arguments."""
        return self.gpu.dummy_image()

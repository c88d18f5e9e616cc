"""One table: IR op x which ONNX/TF/Caffe/TFLite ops produce it x which runtimes have a kernel.

Which framework ops produce an IR op is read from the mapping functions' source
(`ctx.add("Conv2D", ...)` and the module helpers they call), so the table is
generated from the code and cannot drift; tests/project/test_docs.py checks docs/ops.md.
"""
from __future__ import annotations

import inspect
import re
import sys
from collections import defaultdict

from mace.frontends.caffe.registry import load_mappers as caffe
from mace.frontends.onnx.registry import load_mappers as onnx
from mace.frontends.tensorflow.registry import load_mappers as tf
from mace.frontends.tflite.registry import load_mappers as tflite
from mace.ops.registry import all_ops

_ADD = re.compile(r"""\.add\(\s*["']([A-Za-z0-9_]+)["']""")
_CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\(")

RUNTIME_TAGS = {"CPU": ("cpu",), "GPU": ("gpu",), "DSP": ("int8",)}  # the DSP simulator runs the quantized kernels


def _emitted(fn, depth: int = 2) -> set:
    """IR op types a mapping function adds, following helpers of its own module."""
    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError):
        return set()
    found = set(_ADD.findall(src))
    if depth:
        module = sys.modules[fn.__module__]
        for name in set(_CALL.findall(src)):
            helper = getattr(module, name, None)
            if inspect.isfunction(helper) and helper is not fn:
                found |= _emitted(helper, depth - 1)
    return found


def producers_by_ir_op() -> dict:
    """IR op -> {"ONNX": [...], "TF": [...], "Caffe": [...], "TFLite": [...]} framework op names."""
    table = defaultdict(lambda: defaultdict(set))
    for framework, mappers in (("ONNX", onnx()), ("TF", tf()), ("Caffe", caffe()), ("TFLite", tflite())):
        for name, fn in mappers.items():
            for ir_op in _emitted(fn):
                table[ir_op][framework].add(name)
    return table


def _runtimes(spec) -> dict:
    tags = {t.split(":")[0] for t in spec.kernels}
    return {rt: "yes" if tags & set(names) else "" for rt, names in RUNTIME_TAGS.items()}


def support_markdown() -> list:
    producers = producers_by_ir_op()
    lines = ["", "## Support table", "",
             "Each IR op, the framework ops that convert to it, and the runtimes with a kernel for it "
             "(an op without a GPU kernel runs on the CPU under `cpu+gpu`; the DSP column lists the "
             "quantized kernels, which also run a `quantize: 1` model on the CPU). Framework ops that only fold away (Shape, Constant, ...) or "
             "disappear (Identity, Dropout) are not listed.", "",
             "| IR op | ONNX | TensorFlow | Caffe | TFLite | CPU | GPU | DSP |",
             "|---|---|---|---|---|---|---|---|"]
    for name, spec in sorted(all_ops().items()):
        p = producers.get(name, {})
        cols = [", ".join(sorted(p.get(f, ()))) for f in ("ONNX", "TF", "Caffe", "TFLite")]
        rt = _runtimes(spec)
        lines.append(f"| {name} | {cols[0]} | {cols[1]} | {cols[2]} | {cols[3]} | {rt['CPU']} | "
                     f"{rt['GPU']} | {rt['DSP']} |")
    return lines

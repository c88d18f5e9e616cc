"""Which model `run --validate` runs as the reference: the converted file in its own framework, or,
for an ONNX model whose deployment entry names its `backend` and its original file, that original.

MACE's `backend` key picked the framework that validated an ONNX model. A model exported to ONNX
from TensorFlow / Keras / TFLite is best checked against the file it came from: with

    backend: tensorflow                     # or keras, tflite
    original_model_file_path: net.h5        # a local path or URL, as model_file_path
    original_model_sha256_checksum: ...
    original_input_tensors: [x]             # the original's names, in input_tensors order
    original_output_tensors: [Identity]     # (default: the same names)

the original runs in that framework on the same inputs, moved between the ONNX model's layout
(NCHW) and the original's (NHWC) on 4-D tensors. When that cannot be (the framework is not
installed, or no reference exists for it here) onnxruntime runs the ONNX file and a note says why.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

from mace.config.fetch import fetch
from mace.config.files import fetch_model_files
from mace.util.invocation import install_hint
from mace.validate.reference import ONNX_BACKENDS, REFERENCE_NAMES, backend_note

# backend -> (reference platform, the module that must be importable, the extra that installs it)
ORIGINAL_BACKENDS = {"tensorflow": ("tensorflow", "tensorflow", "tf"),
                     "keras": ("keras", "tensorflow", "tf"),
                     "tflite": ("tflite", "ai_edge_litert", "tflite")}


@dataclass
class Reference:
    platform: str                 # whose runner: onnx, tensorflow, keras, tflite, caffe
    model_path: Path
    weight_path: Path | None = None
    names: dict = field(default_factory=dict)   # deployment tensor name -> the reference's name
    note: str | None = None       # what the user should know about this choice


def _downloads(build_dir) -> Path:
    return Path(build_dir or "builds") / "downloads"


def _original(config, model, build_dir) -> Path:
    key = f"{model.key_path}.original_model_file_path"
    return fetch(model.original_model_file_path, model.original_model_sha256_checksum, key, config.path,
                 _downloads(build_dir), allow_dir=True)   # a SavedModel is a directory


def _names(sg) -> dict:
    names = {}
    for ours, theirs in ((sg.input_tensors, sg.original_input_tensors),
                         (sg.output_tensors, sg.original_output_tensors)):
        names.update(zip(ours, theirs or ours))
    return names


def plan(model, sg) -> tuple:
    """(the original's reference platform or None, the note to show): what `run --validate`
    will run, decided without reading a file (`config` shows the note too)."""
    backend = (sg.backend or "").strip().lower()
    given = model.original_model_file_path
    if model.platform == "onnx" and backend in ORIGINAL_BACKENDS and given:
        platform, module, extra = ORIGINAL_BACKENDS[backend]
        if importlib.util.find_spec(module) is None:
            return None, (f"backend: {backend}: {REFERENCE_NAMES[platform]} is not installed "
                          f"({install_hint(extra)}), so "
                          f"the original {given} cannot run; onnxruntime runs the ONNX file")
        return platform, f"backend: {backend}: validated against the original model {given} in " \
                         f"{REFERENCE_NAMES[platform]}"
    if model.platform == "onnx" and backend in ORIGINAL_BACKENDS:
        return None, (f"backend: {backend}: no original_model_file_path given, so onnxruntime runs the ONNX "
                      f"file (name the {backend} file it was exported from to validate against that)")
    if model.platform == "onnx" and given and backend in ("", "onnxruntime", "onnx"):
        return None, (f"original_model_file_path {given} is not used: backend is "
                      f"{backend or 'onnxruntime'}, so onnxruntime runs the ONNX file (set backend: "
                      f"{', '.join(ORIGINAL_BACKENDS)} to validate against the original)")
    if model.platform == "onnx" and backend in ONNX_BACKENDS and given:
        return None, (f"backend: {backend}: no {ONNX_BACKENDS[backend]} reference in this release, so the "
                      f"original {given} cannot run; onnxruntime runs the ONNX file")
    return None, backend_note(model.platform, sg.backend)


def reference_for(config, model, sg, build_dir=None) -> Reference:
    """The validation reference of `model` (see the module's doc); fetches the files it needs."""
    platform, note = plan(model, sg)
    if platform:
        return Reference(platform, _original(config, model, build_dir), None, _names(sg), note)
    model_path, weight_path = fetch_model_files(config, model, build_dir)
    return Reference(model.platform, model_path, weight_path, {}, note)

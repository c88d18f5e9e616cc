"""Run the original model in the framework that owns its format (the validation reference).

Inputs and outputs here are in the framework's own layout; mace/run.py moves
them between that and the caller's layout.
"""
from __future__ import annotations

from pathlib import Path

from mace.errors import ModelError
from mace.frontends.tensorflow.loader import import_tf, load_graph_def, tensor_name
from mace.validate.caffe_reference import run_caffe as forward
from mace.validate.isolated import run_isolated
from mace.frontends.tflite.model_file import read_model
from mace.util.invocation import install_hint


def run_onnxruntime(model_path: Path, inputs: dict, output_names: list, num_threads: int = 0) -> dict:
    """The .onnx file in onnxruntime, in a child process (mace/validate/isolated.py): a crash in its
    native code is an error naming it, not the end of our process."""
    return run_isolated("onnxruntime", "onnxruntime", model_path, [inputs], output_names,
                        num_threads=num_threads)[0]


def onnxruntime_here(model_path: Path, inputs: dict, output_names: list, num_threads: int = 0) -> dict:
    """run_onnxruntime in this process (what its child runs)."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(model_path))
    declared = {o.name for o in model.graph.output}
    for name in output_names:  # intermediate tensors become extra outputs
        if name not in declared:
            model.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    if num_threads:
        opts.intra_op_num_threads = num_threads
    try:
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        values = sess.run(output_names, inputs)
    except Exception as e:
        raise ModelError(f"{model_path}: onnxruntime could not run the reference model: {e}") from None
    return dict(zip(output_names, values))


def run_tensorflow(model_path: Path, inputs: dict, output_names: list, num_threads: int = 0) -> dict:
    """The frozen graph (a Keras file or SavedModel is frozen the way the converter does it)
    in a TensorFlow session; names may be written with or without ':0'."""

    tf = import_tf()
    graph_def = load_graph_def(model_path)  # outside the graph below: freezing Keras needs eager mode
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=num_threads,
                                      inter_op_parallelism_threads=num_threads)
    try:
        with tf.compat.v1.Session(graph=graph, config=config) as sess:
            values = sess.run([tensor_name(n) for n in output_names],
                              {tensor_name(n): v for n, v in inputs.items()})
    except Exception as e:
        raise ModelError(f"{model_path}: TensorFlow could not run the reference model: "
                         f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    return dict(zip(output_names, values))


def run_litert(model_path: Path, inputs: dict, output_names: list, num_threads: int = 0,
               integer_outputs=()) -> dict:
    """The .tflite file in LiteRT's interpreter (ai-edge-litert). Any tensor may be asked for
    (all are kept); quantized ones come back as the reals they stand for, those named in
    `integer_outputs` as the integers LiteRT holds (output_data_types int8/uint8), and a float
    input fed to a quantized input tensor is quantized with that tensor's scale and zero point."""
    return run_litert_sequence(model_path, [inputs], output_names, num_threads, integer_outputs)[0]


def run_litert_sequence(model_path: Path, sequence: list, output_names: list, num_threads: int = 0,
                        integer_outputs=()) -> list:
    """run_litert over a sequence of input dicts in one interpreter, so that a stateful model's
    variables carry from one step to the next (a streaming model); one output dict per step.
    LiteRT runs in a child process (mace/validate/isolated.py): its segfault on a hostile model is
    an error naming it and the signal, not the end of our process."""
    return run_isolated("LiteRT", "litert", model_path, sequence, output_names, num_threads=num_threads,
                        integer_outputs=list(integer_outputs))


def litert_sequence_here(model_path: Path, sequence: list, output_names: list, num_threads: int = 0,
                         integer_outputs=()) -> list:
    """run_litert_sequence in this process (what its child runs)."""
    import warnings

    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        raise ModelError(f"validating a TFLite model needs LiteRT: {install_hint('tflite')}") from None
    model = read_model(model_path)
    try:   # LiteRT's own refusals (an op version or schema it lacks, shapes it will not take) are its
        with warnings.catch_warnings():   # keeping every tensor is what layer validation is for
            warnings.simplefilter("ignore")
            interp = Interpreter(model_path=str(model_path), num_threads=num_threads or None,
                                 experimental_preserve_all_tensors=True)
    except Exception as e:
        raise ModelError(f"{model_path}: LiteRT refuses the reference model: {type(e).__name__}: "
                         f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}") from None
    try:
        return [_litert_step(interp, model, model_path, inputs, output_names, integer_outputs, k == 0)
                for k, inputs in enumerate(sequence)]
    except ModelError:
        raise
    except Exception as e:
        raise ModelError(f"{model_path}: LiteRT could not run the reference model: "
                         f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None


def _litert_step(interp, model, model_path, inputs: dict, output_names, integer_outputs, first: bool) -> dict:
    import numpy as np

    if first:
        for name, value in inputs.items():
            t = _litert_tensor(model, name, model_path)
            if tuple(np.shape(value)) != tuple(t.shape):
                interp.resize_tensor_input(t.index, list(np.shape(value)))
        interp.allocate_tensors()
    for name, value in inputs.items():
        t = _litert_tensor(model, name, model_path)
        interp.set_tensor(t.index, _to_stored(t, np.asarray(value)))
    interp.invoke()
    result = {}
    for name in output_names:
        t = _litert_tensor(model, name, model_path)
        value = interp.get_tensor(t.index)
        result[name] = value.copy() if name in integer_outputs else _real(t, value)
    return result


def litert_reals(model_path: Path, name: str, value):
    """`value`, integers of the model's tensor `name` (output_data_types int8/uint8), as the reals
    they stand for, as LiteRT's own outputs are compared: a cosine of raw integers would be
    dominated by the zero point."""
    return _real(_litert_tensor(read_model(model_path), name, model_path), value)


def _litert_tensor(model, name: str, model_path):
    t = model.tensor(name)
    if t is None:
        raise ModelError(f"{model_path}: tensor '{name}' is not in the TFLite model")
    return t


def _to_stored(t, value):
    import numpy as np

    if t.real_range() is not None and value.dtype.kind == "f":   # a float fed to a quantized input
        info = np.iinfo(t.dtype)
        s, z = float(t.scale.reshape(-1)[0]), _zero_point(t)
        return np.clip(np.rint(value / s) + z, info.min, info.max).astype(t.dtype)
    return value.astype(t.dtype) if t.dtype is not None else value


def _zero_point(t) -> int:
    return int(t.zero_point.reshape(-1)[0]) if t.zero_point is not None and t.zero_point.size else 0


def _real(t, value):
    import numpy as np

    if t.real_range() is None:
        return value
    return ((value.astype(np.int64) - _zero_point(t)) * float(t.scale.reshape(-1)[0])).astype(np.float32)


REFERENCES = {"onnx": run_onnxruntime, "tensorflow": run_tensorflow, "keras": run_tensorflow,
              "tflite": run_litert}


def run_caffe(model_path: Path, inputs: dict, output_names: list, num_threads: int = 0,
              weight_path: Path | None = None) -> dict:
    """No Caffe runtime installs here: Caffe's forward pass written out in numpy."""

    return forward(model_path, inputs, output_names, num_threads, weight_path)


REFERENCES["caffe"] = run_caffe


def reference_runner(platform: str):
    try:
        return REFERENCES[platform]
    except KeyError:
        raise ModelError(f"no validation reference for platform '{platform}' yet") from None


# What validates each platform here (named in notes about the .yml's `backend`).
REFERENCE_NAMES = {"onnx": "onnxruntime", "tensorflow": "TensorFlow", "keras": "TensorFlow",
                   "tflite": "LiteRT", "caffe": "Caffe's forward pass in numpy"}
ONNX_BACKENDS = {"tensorflow": "onnx-tf", "caffe2": "Caffe2", "pytorch": "PyTorch"}


def backend_note(platform: str, backend: str) -> str | None:
    """MACE's `backend` key picked the framework that ran an ONNX model for validation. Here
    onnxruntime runs every ONNX file, so any other choice is reported, never silently dropped."""
    b = (backend or "").strip().lower()
    own = REFERENCE_NAMES.get(platform, platform)
    if b in ("", "onnxruntime", "onnx") or (platform != "onnx" and b in (platform, own.lower())) or \
            (platform == "keras" and b == "tensorflow"):
        return None
    if platform == "onnx" and b in ONNX_BACKENDS:
        return (f"backend: {b}: MACE ran the ONNX file through {ONNX_BACKENDS[b]}; here onnxruntime runs the "
                f"same ONNX file (the reference is the ONNX graph either way)")
    if platform == "onnx":
        return f"backend: {b}: no {b} reference in this release; onnxruntime runs the ONNX file"
    return f"backend: {b}: MACE uses `backend` for ONNX models only; this {platform} model is validated with {own}"

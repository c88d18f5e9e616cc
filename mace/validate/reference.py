"""Run the original model in the framework that owns its format (the validation reference).

Inputs and outputs here are in the framework's own layout; mace/run.py moves
them between that and the caller's layout.
"""
from __future__ import annotations

from pathlib import Path

from mace.errors import ModelError


def run_onnxruntime(model_path: Path, inputs: dict, output_names: list, num_threads: int = 0) -> dict:
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


REFERENCES = {"onnx": run_onnxruntime}


def reference_runner(platform: str):
    try:
        return REFERENCES[platform]
    except KeyError:
        raise ModelError(f"no validation reference for platform '{platform}' yet") from None

"""Compare a run's outputs with the original framework's on the same inputs, or with the
deployment file's validation_outputs_data (`run --validate`)."""
from __future__ import annotations

import numpy as np

from mace.config.deployment import ModelConfig, SubgraphConfig
from mace.config.files import data_file, read_npy
from mace.util.regular_file import NotRegularFile
from mace.config.specs import user_to_framework
from mace.errors import ModelError, RuntimeInputError
from mace.frontends import FRAMEWORK_FORMATS
from mace.validate.metrics import compare
from mace.validate.original import reference_for
from mace.validate.reference import litert_reals, reference_runner, run_litert_sequence


def _reference_files(config, sg: SubgraphConfig, build_dir=None) -> dict:
    """validation_outputs_data: the expected outputs, one .npy per output in the caller's layout
    (local files or URLs, downloaded and checksummed as model files)."""
    where = f"{config.path}: {sg.key_path}.validation_outputs_data"
    ref = {}
    for i, s in enumerate(sg.outputs):
        path = data_file(config, sg, "validation_outputs_data", i, build_dir)
        try:
            ref[s.name] = read_npy(path)
        except FileNotFoundError:
            raise RuntimeInputError(f"{where}: output file {path} not found") from None
        except NotRegularFile as e:
            raise RuntimeInputError(f"{where}: output file {path} is {e.strerror}") from None
        except (ValueError, OSError) as e:
            raise RuntimeInputError(f"{where}: {path} is not a readable .npy file ({e})") from None
    return ref


def validate_outputs(config, model: ModelConfig, sg: SubgraphConfig, inputs: dict, outputs: dict,
                     num_threads: int = 0, build_dir=None, use_files: bool = False, reference=None,
                     steps: list | None = None) -> list:
    """Compare `outputs` with the original framework on the same `inputs` (`reference`: which model
    runs, mace/validate/original.py), or with the validation_outputs_data files (`use_files`: the
    inputs are validation_inputs_data). `steps`, [(inputs, outputs), ...]: a stateful model's
    run over a sequence from its initial state; the reference runs the same sequence (LiteRT, one
    interpreter) and each output is compared over all the steps at once."""
    if use_files and sg.validation_outputs_data:
        ref = _reference_files(config, sg, build_dir)
        return _something_compared(config, model, [
            _compare(config, model, s.name, ref[s.name], outputs[s.name], sg.threshold()) for s in sg.outputs])
    reference = reference or reference_for(config, model, sg, build_dir)
    steps = steps or [(inputs, outputs)]
    fw_format = FRAMEWORK_FORMATS[model.platform]
    ref_format = FRAMEWORK_FORMATS[reference.platform]   # an original's (NHWC) may differ from the ONNX file's
    sequence = [_framework_inputs(sg, step_inputs, fw_format, ref_format, reference) for step_inputs, _ in steps]
    extra = {"weight_path": reference.weight_path} if reference.weight_path else {}  # Caffe's .caffemodel
    names = [reference.names.get(t, t) for t in sg.output_tensors]
    if len(steps) > 1:
        if reference.platform != "tflite":
            raise ModelError(f"{config.path}: {model.key_path}: a sequence is validated against LiteRT "
                             f"only (stateful TFLite models), not {reference.platform}")
        refs = run_litert_sequence(reference.model_path, sequence, names, max(num_threads, 0), **extra)
    else:
        refs = [reference_runner(reference.platform)(reference.model_path, sequence[0], names,
                                                     max(num_threads, 0), **extra)]  # 0: the framework's default
    metrics = []
    for s, name in zip(sg.outputs, names):
        ref = [_caller_layout(r[name], s, fw_format, ref_format) for r in refs]
        ours = [step_outputs[s.name] for _, step_outputs in steps]
        if reference.platform == "tflite" and s.dtype != "float32":   # integers of a quantized output:
            ours = [litert_reals(reference.model_path, name, v) for v in ours]   # compared as the reals
        if len(steps) > 1:
            ref, ours = [np.stack(ref)], [np.stack(ours)]
        metrics.append(_compare(config, model, s.name, ref[0], ours[0], sg.threshold()))
    return _something_compared(config, model, metrics)


def _framework_inputs(sg, inputs: dict, fw_format: str, ref_format: str, reference) -> dict:
    fw_inputs = {}
    for s in sg.inputs:
        perm = user_to_framework(s.shape, s.data_format, fw_format)
        value = inputs[s.name].transpose(perm) if perm else inputs[s.name]
        perm = user_to_framework(value.shape, fw_format, ref_format)
        fw_inputs[reference.names.get(s.name, s.name)] = value.transpose(perm) if perm else value
    return fw_inputs


def _caller_layout(value, s, fw_format: str, ref_format: str):
    perm = user_to_framework(value.shape, ref_format, fw_format)
    value = value.transpose(perm) if perm else value
    perm = user_to_framework(value.shape, fw_format, s.data_format) if s.data_format != "NONE" else None
    return value.transpose(perm) if perm else value


def _something_compared(config, model, metrics: list) -> list:
    """An output left empty by both sides (no box kept) agrees; a validation where every output
    was empty compared nothing, and a check that checked nothing has not passed."""
    if metrics and not any(m.compared for m in metrics):
        names = ", ".join(f"'{m.name}'" for m in metrics)
        raise ModelError(f"{config.path}: {model.key_path}: nothing was compared: every output ({names}) "
                         f"is empty in both runs; pass inputs that yield results with --input_dir")
    return metrics


def _compare(config, model, name, ref, out, threshold):
    try:
        return compare(name, ref, out, threshold)
    except ValueError as e:
        raise ModelError(f"{config.path}: {model.key_path}: {e}") from None

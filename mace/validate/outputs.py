"""Compare a run's outputs with the original framework's on the same inputs, or with the
deployment file's validation_outputs_data (`run --validate`)."""
from __future__ import annotations

from mace.config.deployment import ModelConfig, SubgraphConfig
from mace.config.files import data_file, fetch_model_files, read_npy
from mace.config.regular_file import NotRegularFile
from mace.config.specs import user_to_framework
from mace.errors import ModelError, RuntimeInputError
from mace.frontends import FRAMEWORK_FORMATS
from mace.validate.metrics import compare
from mace.validate.reference import reference_runner


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
                     num_threads: int = 0, build_dir=None, use_files: bool = False) -> list:
    """Compare `outputs` with the original framework on the same `inputs`, or with the
    validation_outputs_data files (`use_files`: the inputs are validation_inputs_data)."""
    if use_files and sg.validation_outputs_data:
        ref = _reference_files(config, sg, build_dir)
        return [_compare(config, model, s.name, ref[s.name], outputs[s.name], sg.threshold())
                for s in sg.outputs]
    fw_format = FRAMEWORK_FORMATS[model.platform]
    model_path, weight_path = fetch_model_files(config, model, build_dir)
    fw_inputs = {}
    for s in sg.inputs:
        perm = user_to_framework(s.shape, s.data_format, fw_format)
        fw_inputs[s.name] = inputs[s.name].transpose(perm) if perm else inputs[s.name]
    weights = {"weight_path": weight_path} if weight_path else {}  # Caffe's .caffemodel
    ref = reference_runner(model.platform)(model_path, fw_inputs, list(sg.output_tensors),
                                           max(num_threads, 0), **weights)  # 0: the framework's default
    metrics = []
    for s in sg.outputs:
        value = ref[s.name]
        perm = user_to_framework(value.shape, fw_format, s.data_format) \
            if s.data_format != "NONE" else None
        value = value.transpose(perm) if perm else value
        metrics.append(_compare(config, model, s.name, value, outputs[s.name], sg.threshold()))
    return metrics


def _compare(config, model, name, ref, out, threshold):
    try:
        return compare(name, ref, out, threshold)
    except ValueError as e:
        raise ModelError(f"{config.path}: {model.key_path}: {e}") from None

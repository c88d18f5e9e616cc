"""Load and validate a deployment .yml into DeploymentConfig / ModelConfig / SubgraphConfig.

Every value is normalised (MACE's comma-string and list forms both work),
every default is filled, and each value remembers where it came from (the file,
the model level, or the default) so `converter.py config` can show it.
Errors name the file and the key path, e.g.
`deploy.yml: models.mobilenet.subgraphs[0].input_shapes: expected comma-separated integers, got "1,224,x"`.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from mace.config import images, names, schema
from mace.ir import runtimes
from mace.ir.runtimes import DSP_BACKEND_RUNTIMES, QUANTIZED_ONLY
from mace.config.specs import TensorSpec
from mace.config.yaml_io import load_yaml
from mace.errors import ConfigError


class _Level:
    """Attribute access over normalised values (the schema tables are the source of truth)."""

    values: dict
    origin: dict

    def __getattr__(self, name):
        values = self.__dict__.get("values", {})
        if name in values:
            return values[name]
        raise AttributeError(name)


@dataclass
class SubgraphConfig(_Level):
    name: str
    key_path: str
    values: dict = field(default_factory=dict)
    origin: dict = field(default_factory=dict)

    def threshold(self) -> float:
        """Validation threshold for this subgraph's runtime (quantized models use QUANTIZE)."""
        table = dict(schema.DEFAULT_THRESHOLDS, **self.values["validation_threshold"])
        if (self.quantize or self.quantize_large_weights) and self.runtime in ("cpu", "gpu", "cpu+gpu"):
            return table["QUANTIZE"]
        return table[runtimes.RUNTIMES[self.runtime].threshold_key]

    @property
    def inputs(self) -> list:
        return [TensorSpec(n, tuple(s), f, t, tuple(r), images.for_input(self.image_preprocess, n),
                           dict(getattr(s, "ranges", {})))
                for n, s, f, t, r in zip(self.input_tensors, self.input_shapes, self.input_data_formats,
                                         self.input_data_types, self.input_ranges)]

    @property
    def outputs(self) -> list:
        shapes = self.output_shapes or [None] * len(self.output_tensors)
        return [TensorSpec(n, tuple(s) if s else None, f, t) for n, s, f, t in zip(
            self.output_tensors, shapes, self.output_data_formats, self.output_data_types)]


@dataclass
class ModelConfig(_Level):
    name: str
    key_path: str
    values: dict = field(default_factory=dict)
    origin: dict = field(default_factory=dict)
    subgraphs: list = field(default_factory=list)
    # The model as one graph (what convert, run and the reports use): its only subgraph, or
    # the named subgraphs joined (external inputs/outputs, the least precise runtime).
    graph: SubgraphConfig | None = None


@dataclass
class DeploymentConfig(_Level):
    path: Path
    values: dict = field(default_factory=dict)
    origin: dict = field(default_factory=dict)
    models: dict = field(default_factory=dict)
    env_used: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)

    @property
    def base_dir(self) -> Path:
        return self.path.parent


class _Reader:
    def __init__(self, path: Path):
        self.path = path
        self.warnings = []

    def fail(self, key_path: str, msg: str):
        raise ConfigError(f"{self.path}: {key_path}: {msg}")

    def resolve(self, raw: dict, keys, prefix: str, inherited=None) -> tuple:
        """Normalise `raw` against `keys`; returns (values, origin)."""
        table = schema.key_table(keys)
        values, origin, unknown = {}, {}, []
        for name, value in raw.items():
            if name not in table:
                close = difflib.get_close_matches(str(name), list(table), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                self.warnings.append(f"{prefix}{name}: unknown key, ignored{hint}")
                unknown.append(str(name))
                continue
            if value is None and not table[name].required:
                continue  # `key:` with no value means "not given": inherit or default
            try:
                values[name] = table[name].parse(value) if value is not None else None
            except ValueError as e:
                self.fail(prefix + name, str(e))
            if table[name].required and table[name].parse is not schema.any_value and \
                    values[name] in (None, "", []):
                self.fail(prefix + name, "required key has no value")
            origin[name] = "file"
        for key in keys:
            if key.name in values:
                continue
            if inherited and key.name in inherited.values:
                values[key.name] = inherited.values[key.name]
                origin[key.name] = "model" if inherited.origin[key.name] == "file" else \
                    inherited.origin[key.name]
            elif key.required:
                close = difflib.get_close_matches(key.name, unknown, n=1)
                hint = f" (found '{close[0]}': a misspelling?)" if close else ""
                self.fail(prefix + key.name, f"required key is missing{hint}")
            else:
                values[key.name] = key.default
                origin[key.name] = "default"
        return values, origin


# One value of these applies to every tensor; the other per-tensor lists (shapes, files,
# aliases) name one thing per tensor and must have exactly one entry per tensor.
BROADCAST_KEYS = ("input_data_formats", "input_data_types", "input_ranges",
                  "output_data_formats", "output_data_types")


def _per_tensor(reader, sg, key, count, what):
    """Broadcast a one-value list to `count` tensors, or check it has `count` entries."""
    items = sg.values[key]
    if len(items) == 1 and count > 1 and key in BROADCAST_KEYS:
        sg.values[key] = items * count
    elif len(items) != count and not (key in OPTIONAL_LISTS and not items):
        reader.fail(f"{sg.key_path}.{key}", f"has {len(items)} entries but there are {count} {what}")


def _check_shape_ranges(reader, sg):
    """Variable dimensions (input_shapes: -1..8,...) where the runtime can change shapes."""
    ranged = [n for n, s in zip(sg.input_tensors, sg.input_shapes) if getattr(s, "ranges", None)]
    fixed = sg.runtime in runtimes.RUNTIMES and runtimes.RUNTIMES[sg.runtime].fixed_shapes
    if ranged and fixed:
        reader.fail(f"{sg.key_path}.input_shapes",
                    f"input {ranged[0]!r} has a variable dimension, but the {sg.runtime} runtime runs the "
                    f"converted shapes only (give fixed dimensions, or use runtime: cpu)")


def shape_range_notes(sg) -> list:
    """One line per variable input dimension, as `config` shows them."""
    notes = []
    for name, shape in zip(sg.input_tensors, sg.input_shapes):
        for dim, (low, high) in sorted(getattr(shape, "ranges", {}).items()):
            notes.append(f"{sg.key_path}.input_shapes: input '{name}' dimension {dim} varies "
                         f"{low}..{high if high is not None else 'unbounded'} (converted at {shape[dim]})")
    return notes


def with_input_shapes(sg: SubgraphConfig, shapes: dict, flag: str = "--input_shape") -> SubgraphConfig:
    """A copy of `sg` whose inputs have `shapes` ({name: dims}, e.g. from `run --input_shape`)
    and no validation files (those hold the converted shapes): random inputs at the new shapes,
    validated against the framework. Whether the model runs at them is the engine's to say."""
    unknown = sorted(set(shapes) - set(sg.input_tensors))
    if unknown:
        raise ConfigError(f"{flag} {unknown[0]}: not an input of {sg.key_path} "
                          f"(its inputs: {', '.join(sg.input_tensors)})")
    values = dict(sg.values)
    new = []
    for name, shape in zip(sg.input_tensors, sg.input_shapes):
        if name in shapes and len(shapes[name]) != len(shape):
            raise ConfigError(f"{flag} {name}={','.join(map(str, shapes[name]))}: the input has "
                              f"{len(shape)} dimensions ({','.join(map(str, shape))})")
        new.append(list(shapes.get(name, shape)))
    values["input_shapes"] = new
    for key in ("validation_inputs_data", "validation_outputs_data",
                "validation_inputs_data_sha256_checksum", "validation_outputs_data_sha256_checksum"):
        values[key] = []
    origin = {**sg.origin, "input_shapes": flag}
    return SubgraphConfig(sg.name, sg.key_path, values, origin)


def _check_subgraph(reader, sg, model):
    n_in, n_out = len(sg.input_tensors), len(sg.output_tensors)
    if len(sg.input_shapes) != n_in:
        reader.fail(f"{sg.key_path}.input_shapes",
                    f"{len(sg.input_shapes)} shape(s) for {n_in} input tensor(s) {sg.input_tensors}")
    for key in ("input_data_formats", "input_data_types", "input_ranges",
                "validation_inputs_data", "validation_inputs_data_sha256_checksum", "input_aliases",
                "original_input_tensors"):
        _per_tensor(reader, sg, key, n_in, "input tensors")
    for key in ("output_shapes", "output_data_formats", "output_data_types",
                "validation_outputs_data", "validation_outputs_data_sha256_checksum", "output_aliases",
                "original_output_tensors"):
        _per_tensor(reader, sg, key, n_out, "output tensors")
    for data in ("validation_inputs_data", "validation_outputs_data"):
        if sg.values[data + "_sha256_checksum"] and not sg.values[data]:
            reader.fail(f"{sg.key_path}.{data}_sha256_checksum", f"given without {data}")
    for name, shape, fmt in zip(sg.input_tensors, sg.input_shapes, sg.input_data_formats):
        if fmt in ("NHWC", "NCHW") and len(shape) != 4 and sg.origin["input_data_formats"] == "file":
            reader.fail(f"{sg.key_path}.input_data_formats",
                        f"{fmt} needs a 4-D shape but '{name}' has {shape} (use NONE)")
    _check_shape_ranges(reader, sg)
    runtime = sg.runtime
    if runtime in schema.ABSENT_RUNTIMES and sg.origin["runtime"] in ("file", "model"):
        where = model.key_path if sg.origin["runtime"] == "model" else sg.key_path
        warning = (f"{where}.runtime: this release has no {runtime.upper()} runtime (convert refuses it); "
                   f"the nearest is {schema.ABSENT_RUNTIMES[runtime]}")
        if warning not in reader.warnings:
            reader.warnings.append(warning)
    if sg.data_type is None or sg.origin["data_type"].startswith("default"):
        # a default follows the subgraph's own runtime, not the one its model defaulted for
        sg.values["data_type"] = schema.DEFAULT_DATA_TYPE[runtime]
        sg.origin["data_type"] = f"default for {runtime}"
    elif sg.data_type not in schema.DATA_TYPES[runtime]:
        where = model.key_path if sg.origin["data_type"] == "model" else sg.key_path  # where it was written
        reader.fail(f"{where}.data_type", f"'{sg.data_type}' is not valid for runtime {runtime}; "
                                          f"use one of {', '.join(schema.DATA_TYPES[runtime])}")


def _check_image_inputs(reader, model):
    """image_preprocess names inputs of the model (a named subgraph may declare another's)."""
    inputs = {t for sg in model.subgraphs for t in sg.input_tensors}
    for sg in model.subgraphs:
        unknown = sorted(set(sg.image_preprocess or {}) - inputs - {images.ALL_INPUTS})
        if unknown:
            where = model.key_path if sg.origin["image_preprocess"] == "model" else sg.key_path
            reader.fail(f"{where}.image_preprocess", f"no input named {', '.join(map(repr, unknown))}; "
                                                     f"inputs: {', '.join(sorted(inputs))}")


def _subgraphs(reader, model, raw):
    prefix = f"{model.key_path}.subgraphs"
    if isinstance(raw, list):
        items = [(("default_graph" if i == 0 else f"graph_{i}"), f"{prefix}[{i}]", v)
                 for i, v in enumerate(raw)]
    elif isinstance(raw, dict):
        items = [(str(k), f"{prefix}.{k}", v) for k, v in raw.items()]
    else:
        reader.fail(prefix, "expected a list of subgraphs or a mapping name -> subgraph")
    if not items:
        reader.fail(prefix, "at least one subgraph is required")
    result = []
    for name, path, value in items:
        if not isinstance(value, dict):
            reader.fail(path, "expected a mapping of subgraph keys")
        values, origin = reader.resolve(value, schema.SUBGRAPH_KEYS, path + ".", inherited=model)
        sg = SubgraphConfig(name, path, values, origin)
        _check_subgraph(reader, sg, model)
        result.append(sg)
    return sorted(result, key=lambda s: s.order) if isinstance(raw, dict) else result


# ---- the model as one graph (named subgraphs, op placement: docs/placement.md) ----------
IN_KEYS = ("input_tensors", "input_shapes", "input_data_formats", "input_data_types", "input_ranges",
           "input_aliases", "validation_inputs_data", "validation_inputs_data_sha256_checksum",
           "original_input_tensors")
OUT_KEYS = ("output_tensors", "output_shapes", "output_data_formats", "output_data_types",
            "output_aliases", "validation_outputs_data", "validation_outputs_data_sha256_checksum",
            "original_output_tensors")
# keys whose lists may be empty (not given) in a subgraph
OPTIONAL_LISTS = ("input_aliases", "validation_inputs_data", "validation_inputs_data_sha256_checksum",
                  "output_shapes", "output_aliases", "validation_outputs_data",
                  "validation_outputs_data_sha256_checksum", "original_input_tensors",
                  "original_output_tensors")


def default_preference(runtime: str) -> list:
    """The runtimes `placement: auto` tries when placement_preference is not given."""
    return {"cpu+gpu": ["gpu", "cpu"], "gpu": ["gpu", "cpu"], "dsp": ["dsp", "cpu"]}.get(runtime, [runtime])


def placed_runtimes(sg) -> set:
    """Every runtime the ops of a subgraph may end up on."""
    if sg.placement == "auto":
        return set(sg.placement_preference or default_preference(sg.runtime))
    own = {"cpu", "gpu"} if sg.runtime == "cpu+gpu" else {sg.runtime}
    return own | {rule["runtime"] for rule in sg.placement or []}


def joined_runtime(runtimes: set) -> str:
    """One runtime name for a set: what `run` sets up. Validation takes the least precise
    one's threshold (dsp/quantized 0.98 < gpu 0.995 < cpu 0.999): a model with dsp groups
    among others is a quantized model on the host engine (its dsp ops quantized), so QUANTIZE."""
    if runtimes == {"dsp"}:
        return "dsp"
    if "gpu" in runtimes:
        return "gpu" if runtimes == {"gpu"} else "cpu+gpu"
    return "cpu" if runtimes <= {"cpu"} else sorted(runtimes)[0]


def _external(reader, model) -> tuple:
    """(inputs, outputs): (subgraph, index) of the tensors no other subgraph makes or reads."""
    made, read = {}, {}
    for pos, sg in enumerate(model.subgraphs):
        for t in sg.output_tensors:
            if t in made:
                reader.fail(f"{sg.key_path}.output_tensors", f"'{t}' is also an output of "
                                                            f"subgraph '{model.subgraphs[made[t]].name}'")
            made[t] = pos
    for pos, sg in enumerate(model.subgraphs):
        for t in sg.input_tensors:
            read.setdefault(t, pos)
            if made.get(t, -1) > pos:
                reader.fail(f"{sg.key_path}.input_tensors",
                            f"'{t}' comes from subgraph '{model.subgraphs[made[t]].name}', which runs "
                            f"later (order {model.subgraphs[made[t]].order} > {sg.order})")
            if made.get(t) == pos:
                reader.fail(f"{sg.key_path}.input_tensors", f"'{t}' is an output of the same subgraph")
    ins = [(sg, i) for sg in model.subgraphs for i, t in enumerate(sg.input_tensors) if t not in made]
    outs = [(sg, i) for sg in model.subgraphs for i, t in enumerate(sg.output_tensors) if t not in read]
    if not ins or not outs:
        reader.fail(f"{model.key_path}.subgraphs", "the subgraphs feed each other in a circle: "
                                                   "no model input or no model output is left")
    return ins, outs


def _joined_values(items, keys) -> dict:
    values = {}
    for key in keys:
        if key in OPTIONAL_LISTS and any(not sg.values[key] for sg, _ in items):
            values[key] = []   # one subgraph did not give them: none are given
        else:
            values[key] = [sg.values[key][i] for sg, i in items]
    return values


def _whole(reader, model):
    parts = model.subgraphs
    runtimes = set().union(*(placed_runtimes(sg) for sg in parts))
    runtime = joined_runtime(runtimes)
    if len(parts) == 1 and runtime == parts[0].runtime:
        return parts[0]
    first = parts[0]
    values, origin = dict(first.values), dict(first.origin)
    if len(parts) > 1:
        ins, outs = _external(reader, model)
        values.update(_joined_values(ins, IN_KEYS))
        values.update(_joined_values(outs, OUT_KEYS))
        for key in ("check_tensors", "check_shapes"):
            values[key] = [x for sg in parts for x in sg.values[key]]
        merged = {k: v for sg in parts for k, v in (sg.image_preprocess or {}).items()}
        values["image_preprocess"] = merged or None
        origin.update({k: "subgraphs" for k in IN_KEYS + OUT_KEYS + ("check_tensors", "check_shapes")})
    gpu_types = {sg.data_type for sg in parts if sg.runtime in ("gpu", "cpu+gpu")}
    if len(gpu_types) > 1:
        reader.fail(f"{model.key_path}.subgraphs", f"the GPU subgraphs ask for different data_type "
                                                   f"{sorted(gpu_types)}; GPU ops share one")
    values["runtime"], origin["runtime"] = runtime, f"placement over {', '.join(sorted(runtimes))}"
    if gpu_types:
        values["data_type"] = gpu_types.pop()
    if values["data_type"] not in schema.DATA_TYPES[runtime]:   # e.g. dsp's uint8 with cpu groups
        values["data_type"] = schema.DEFAULT_DATA_TYPE[runtime]
    values["quantize"] = max([sg.quantize for sg in parts] + [int(bool(runtimes & set(QUANTIZED_ONLY)))])
    return SubgraphConfig(model.name, f"{model.key_path}.subgraphs", values, origin)


def _model(reader, name, raw):
    path = f"models.{name}"
    try:
        name = schema.model_name(name)
    except ValueError as e:
        reader.fail(path, str(e))
    if not isinstance(raw, dict):
        reader.fail(path, "expected a mapping of model keys")
    values, origin = reader.resolve(raw, schema.MODEL_KEYS, path + ".")
    model = ModelConfig(name, path, values, origin)
    if model.data_type is None:
        values["data_type"] = schema.DEFAULT_DATA_TYPE[model.runtime]
        origin["data_type"] = f"default for {model.runtime}"
    if model.weight_file_path and not model.weight_sha256_checksum:
        reader.fail(f"{path}.weight_sha256_checksum", "required when weight_file_path is set")
    if model.original_model_file_path and model.platform != "onnx":
        reader.fail(f"{path}.original_model_file_path", f"only for ONNX models (the file an ONNX model was "
                                                        f"exported from); this model is {model.platform}")
    model.subgraphs = _subgraphs(reader, model, raw["subgraphs"])
    _check_image_inputs(reader, model)
    model.graph = _whole(reader, model)
    _warn_unused_keys(reader, model)
    return model


def _warn_unused_keys(reader, model) -> None:
    """Keys given where nothing reads them, said once each as the unknown keys are: a
    `dsp_backend` for a subgraph with no DSP ops, the new quantization keys of a float model (not
    MACE's quantize_range_file, which MACE ignores there too), the original model's names and
    checksum without the original model."""
    for sg in model.subgraphs:
        quantized = sg.quantize or sg.runtime in QUANTIZED_ONLY   # as convert.quantize_options decides
        unread = {
            "dsp_backend": None if placed_runtimes(sg) & set(DSP_BACKEND_RUNTIMES) else
            f"no op of this model runs on the DSP (runtime {sg.runtime})",
            "quantize_schema": None if quantized or not sg.values.get("quantize_schema") else "quantize is 0",
            "quantize_target_cosine": None if quantized else "quantize is 0",
            # gpu_fp32_ops: auto measures the fp16 model on the calibration samples too
            "quantize_calibration_data": None if quantized or sg.values.get("gpu_fp32_ops") else "quantize is 0",
        }
        for key in ("original_input_tensors", "original_output_tensors"):
            unread[key] = None if model.original_model_file_path else "no original_model_file_path"
        for key, why in unread.items():
            if why is not None and sg.origin.get(key) in ("file", "model") and sg.values.get(key) not in (None, [], ""):
                _warn_once(reader, f"{model.key_path if sg.origin[key] == 'model' else sg.key_path}.{key}: "
                                   f"given, but {why}: ignored")
    if model.values.get("original_model_sha256_checksum") and not model.original_model_file_path:
        _warn_once(reader, f"{model.key_path}.original_model_sha256_checksum: given, but no "
                           f"original_model_file_path: ignored")


def _warn_once(reader, warning: str) -> None:
    if warning not in reader.warnings:
        reader.warnings.append(warning)


def _old_format_keys(values: dict, origin: dict) -> None:
    """MACE 0.8's build_type (and embed_model_data) stand for the format keys when those are absent."""
    formats = {"proto": "file", "code": "code"}
    if values.get("build_type") and origin["model_graph_format"] == "default":
        values["model_graph_format"] = formats[values["build_type"]]
        origin["model_graph_format"] = "build_type"
    if origin["model_data_format"] == "default":
        if values.get("embed_model_data") is not None and values["model_graph_format"] == "code":
            values["model_data_format"] = "code" if values["embed_model_data"] else "file"
            origin["model_data_format"] = "embed_model_data"
        elif values.get("build_type"):
            values["model_data_format"] = formats[values["build_type"]]
            origin["model_data_format"] = "build_type"


def _default_library_name(reader, config) -> None:
    """MACE's CMake-flow files have no library_name: use the only model's name, else the file's
    stem (MACE names that flow's outputs after the model), and say where it came from."""
    if config.values["library_name"] is not None:
        return
    if len(config.models) == 1:
        name, origin = next(iter(config.models)), "the only model's name"
    else:
        name, origin = config.path.stem, "the file's name"
    try:
        config.values["library_name"] = schema.library_name(name)
    except ValueError as e:
        reader.fail("library_name", f"not given, and {origin} cannot stand for it: {e}")
    config.origin["library_name"] = origin


def load_deployment(path) -> DeploymentConfig:
    """Parse, normalise and validate a deployment file (no model file is read here)."""
    path = Path(path)
    data, env_used = load_yaml(path)
    reader = _Reader(path)
    values, origin = reader.resolve(data, schema.TOP_KEYS, "")
    _old_format_keys(values, origin)
    if values["model_graph_format"] == "file" and values["model_data_format"] == "code":
        reader.fail("model_data_format", "'code' needs model_graph_format: code too")
    models_raw = values["models"]
    if not isinstance(models_raw, dict) or not models_raw:
        reader.fail("models", "expected a non-empty mapping of model name -> model")
    config = DeploymentConfig(path, values, origin, env_used=env_used)
    config.models = {str(k): _model(reader, str(k), v) for k, v in models_raw.items()}
    _default_library_name(reader, config)
    clash = names.colliding(config.models)
    if clash:
        reader.fail(f"models.{clash[1]}", f"models '{clash[0]}' and '{clash[1]}' would both be the "
                                          f"code identifier '{names.identifier(clash[0])}'; rename one")
    config.warnings = reader.warnings
    return config

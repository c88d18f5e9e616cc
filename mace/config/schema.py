"""The deployment file's keys: one table per level, with defaults and checks.

This is MACE's schema (tools/common.py YAMLKeyword and converter.py defaults)
as data. Each `Key` parses a raw YAML value into a normalised Python value or
raises ValueError with a message that the loader prefixes with the key path.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from mace.config import names
from mace.ir import runtimes
from mace.config.images import parse_image_preprocess

ABIS = ("host", "armeabi-v7a", "arm64-v8a", "arm64", "armhf", "aarch64", "armv7l")
PLATFORMS = ("tensorflow", "caffe", "onnx", "tflite", "megengine", "keras", "pytorch")
RUNTIMES = tuple(runtimes.RUNTIMES)
RUNTIME_ALIASES = runtimes.ALIASES
# MACE's runtimes this release has no engine for, and what comes nearest here (config says so).
ABSENT_RUNTIMES = {n: r.nearest for n, r in runtimes.RUNTIMES.items() if not r.available}
DATA_TYPES = {n: r.data_types for n, r in runtimes.RUNTIMES.items()}
DEFAULT_DATA_TYPE = {n: r.default_data_type for n, r in runtimes.RUNTIMES.items()}
IO_DATA_TYPES = ("float32", "float16", "int32", "uint8", "int16", "int64", "bfloat16", "bool", "int8")
DATA_FORMATS = ("NONE", "NHWC", "NCHW", "OIHW")
THRESHOLD_KEYS = {"CPU": "CPU", "GPU": "GPU", "DSP": "HEXAGON", "HEXAGON": "HEXAGON", "HTA": "HTA",
                  "APU": "APU", "HTP": "HTP", "QUANTIZE": "QUANTIZE"}
DEFAULT_THRESHOLDS = {"CPU": 0.999, "GPU": 0.995, "HEXAGON": 0.98, "HTA": 0.98, "APU": 0.98,
                      "HTP": 0.98, "QUANTIZE": 0.98}


# ---- value parsers ---------------------------------------------------------
def as_str(v) -> str:
    if isinstance(v, (dict, list)):
        raise ValueError(f"expected a single value, got {type(v).__name__}")
    return str(v).strip()


def as_int(v) -> int:
    if isinstance(v, bool) or not re.fullmatch(r"-?\d+", str(v).strip()):
        raise ValueError(f"expected an integer, got {v!r}")
    return int(str(v).strip())


def as_flag(v) -> int:
    n = int(v) if isinstance(v, bool) else as_int(v)  # `quantize: true` means 1
    if n not in (0, 1):
        raise ValueError(f"expected 0 or 1, got {v!r}")
    return n


def as_str_list(v) -> list:
    """MACE accepts a list or one comma-separated string."""
    if v is None:
        return []
    items = v if isinstance(v, list) else str(v).split(",")
    out = [as_str(x) for x in items]
    if any(not x for x in out):
        raise ValueError(f"empty name in {v!r}")
    return out


def one_of(choices, aliases=None, lower=True) -> Callable:
    def parse(v):
        s = as_str(v)
        s = s.lower() if lower else s.upper()
        s = (aliases or {}).get(s, s)
        if s not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {v!r}")
        return s
    return parse


def list_of(parse_item) -> Callable:
    def parse(v):
        return [parse_item(x) for x in as_str_list(v)]
    return parse


MAX_DIM = 2**31 - 1


class Shape(list):
    """A shape as the model is converted at (plain ints, so every reader sees MACE's meaning),
    with the dimensions the deployment file declares variable: `ranges` {dim: (low, high)},
    high None for no upper bound. `-1..8` is 1..8, converted at 1; `2..` has no upper bound."""

    ranges: dict

    def __init__(self, dims=(), ranges=None):
        super().__init__(dims)
        self.ranges = dict(ranges or {})


def _parse_dim(x) -> tuple:
    """(converted value, (low, high) or None) of one dimension: N, lo..hi, ..hi, lo.. or -1."""
    text = str(x).strip()
    if ".." not in text:
        n = as_int(text)
        return (1, (1, None)) if n == -1 else (n, None)   # -1: the framework's own variable dim
    low, high = (p.strip() for p in text.split("..", 1))
    lo = 1 if low in ("", "-1") else as_int(low)
    hi = None if high in ("", "-1") else as_int(high)
    if lo < 1 or (hi is not None and hi < lo):
        raise ValueError(f"range {text!r}: expected low..high with 1 <= low <= high")
    return lo, (lo, hi)


def parse_shape(v) -> list:
    if isinstance(v, list):
        items = v
    else:
        s = str(v).replace(" ", "")
        items = s.split(",") if s else []
    try:
        parsed = [_parse_dim(x) for x in items]
    except ValueError as e:
        if any(".." in str(x) for x in items):
            raise ValueError(f"{e}, in \"{v}\"") from None
        raise ValueError(f"expected comma-separated integers, got \"{v}\"") from None
    dims = [d for d, _ in parsed]
    if any(d < 0 for d in dims):
        raise ValueError(f"dimensions must be >= 0 (or a range such as -1..8), got \"{v}\"")
    if any(d > MAX_DIM for d in dims) or any(r and r[1] and r[1] > MAX_DIM for _, r in parsed):
        # the IR's limit (mace/ir/checks.py); 10**30 is a typo
        raise ValueError(f"dimensions must be at most {MAX_DIM}, got \"{v}\"")
    ranges = {i: r for i, (_, r) in enumerate(parsed) if r}
    return Shape(dims, ranges) if ranges else dims


def parse_shapes(v) -> list:
    """One shape ("1,224,224,3") or a list of them (one line per tensor)."""
    if v is None:
        return []
    if isinstance(v, list) and v and all(isinstance(x, int) for x in v):
        return [parse_shape(v)]
    if isinstance(v, list) and any(isinstance(x, int) for x in v) and all(
            isinstance(x, int) or ".." in str(x) and "," not in str(x) for x in v):
        return [parse_shape(v)]   # one YAML list with a range in it: [-1..8, 3, 224, 224]
    items = v if isinstance(v, list) else [v]
    return [parse_shape(x) for x in items]


def parse_fixed_shapes(v) -> list:
    """parse_shapes where a variable dimension has no meaning (outputs, checked tensors)."""
    shapes = parse_shapes(v)
    for s in shapes:
        if getattr(s, "ranges", None):
            raise ValueError(f"a range is only allowed in input_shapes, got {v!r}")
    return shapes


def parse_range(v) -> list:
    if isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v):
        lo, hi = v
    else:
        parts = str(v).replace(" ", "").split(",")
        try:
            lo, hi = (float(p) for p in parts)
        except ValueError:
            raise ValueError(f"expected \"min,max\", got \"{v}\"") from None
    if not float(lo) < float(hi):
        raise ValueError(f"min must be below max, got \"{v}\"")
    return [float(lo), float(hi)]


def parse_ranges(v) -> list:
    if v is None:
        return []
    if isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v):
        return [parse_range(v)]
    items = v if isinstance(v, list) else [v]
    return [parse_range(x) for x in items]


def parse_thresholds(v) -> dict:
    if not isinstance(v, dict):
        raise ValueError(f"expected a mapping like {{CPU: 0.999, GPU: 0.995}}, got {v!r}")
    out = {}
    for key, value in v.items():
        name = THRESHOLD_KEYS.get(str(key).upper())
        if name is None:
            raise ValueError(f"unknown runtime '{key}' (use {', '.join(THRESHOLD_KEYS)})")
        try:
            f = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{key}: expected a number, got {value!r}") from None
        if not 0.0 < f <= 1.0:
            raise ValueError(f"{key}: expected a value in (0, 1], got {value}")
        out[name] = f
    return out


def _unit_float(v) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number, got {v!r}") from None
    if isinstance(v, bool) or not 0.0 < f <= 1.0:
        raise ValueError(f"expected a value in (0, 1], got {v!r}")
    return f


def one_script(v) -> str:
    """A path, or a one-item list of it (MACE unwraps it and allows only one script)."""
    if isinstance(v, list):
        if len(v) != 1:
            raise ValueError(f"expected one script (MACE runs only one), got {len(v)}")
        v = v[0]
    s = as_str(v)
    if not s:
        raise ValueError("empty script path")
    return s


def path_or_paths(v):
    """One path (a folder), or a YAML list of files."""
    if isinstance(v, list):
        out = [as_str(x) for x in v]
        if not out or any(not x for x in out):
            raise ValueError(f"expected a folder or a non-empty list of files, got {v!r}")
        return out
    return as_str(v)


def any_value(v):
    return v


def library_name(v) -> str:
    # It names builds/<library_name>/ and a folder on a board; code uses names.identifier() of it.
    return names.check_name(as_str(v), "library name")


def model_name(v) -> str:
    return names.check_name(as_str(v), "model name")


# ---- key tables --------------------------------------------------------------
@dataclass(frozen=True)
class Key:
    name: str
    parse: Callable = as_str
    default: Any = None
    required: bool = False
    doc: str = ""
    later: str = ""       # which feature uses it, when this release only carries it


TOP_KEYS = [
    Key("library_name", library_name, None,
        doc="output goes to builds/<library_name>/; without it: the only model's name, else the file's stem"),
    Key("target_abis", list_of(one_of(ABIS)), ["host"], doc="ABIs to build for"),
    Key("target_socs", list_of(lambda v: as_str(v).lower()), [], doc="SoCs to build/tune for"),
    Key("model_graph_format", one_of(("file", "code")), "file", doc="graph as .pb file or code"),
    Key("model_data_format", one_of(("file", "code")), "file", doc="weights as .data file or code"),
    Key("models", any_value, required=True, doc="name -> model"),
    Key("apu_version_with_no_device", as_str, "-1", later="APU"),
    # MACE 0.8's keys, before model_graph_format / model_data_format
    Key("build_type", one_of(("proto", "code")), None,
        doc="MACE 0.8: proto = graph and data as files, code = both as code (when the new keys are absent)"),
    Key("embed_model_data", as_flag, None, doc="MACE 0.8: 1 = weights in code; read as model_data_format code"),
    Key("linkshared", as_flag, None, later="a shared C++ library (the runtime here is Python)"),
]

# Keys a subgraph may override (MACE: net_conf.update(subgraph)).
INHERITED_KEYS = [
    Key("runtime", one_of(RUNTIMES, RUNTIME_ALIASES), "cpu", doc="cpu, gpu, dsp, cpu+gpu, ..."),
    Key("data_type", as_str, None, doc="per runtime: cpu fp32_fp32, gpu fp16_fp32, dsp uint8"),
    Key("input_data_types", list_of(one_of(IO_DATA_TYPES)), ["float32"]),
    Key("output_data_types", list_of(one_of(IO_DATA_TYPES)), ["float32"]),
    Key("input_ranges", parse_ranges, [[-1.0, 1.0]], doc="random validation inputs / quantize range"),
    Key("limit_opencl_kernel_time", as_flag, 0, doc="GPU: run long OpenCL kernels in short slices"),
    Key("opencl_queue_window_size", as_int, 0, later="GPU runtime"),
    Key("nnlib_graph_mode", as_int, 0, later="DSP runtime"),
    Key("dsp_mode", as_int, 0, later="DSP runtime (MACE 0.9's name for nnlib_graph_mode)"),
    Key("obfuscate", as_flag, 0, doc="opaque op and internal tensor names in every output (docs/codegen.md)"),
    Key("winograd", lambda v: _choice_int(v, (0, 2, 4)), 0, doc="Winograd block for 3x3 stride-1 convs on GPU and CPU (0 off)"),
    Key("gpu_fp32_ops", lambda v: parse_fp32_ops(v), [],
        doc="GPU fp16 models: ops that keep float storage, a list of op names or auto (convert picks "
            "those that saturate or underflow in half on the sample inputs; docs/gpu.md)"),
    Key("quantize", as_flag, 0, doc="1: uint8 model (docs/quantization.md); runtime dsp always quantizes"),
    Key("quantize_large_weights", as_flag, 0, later="quantization"),
    Key("quantize_range_file", as_str, None, doc="`<tensor>@@<min>,<max>` lines (tools/quantize_stat.py)"),
    Key("quantize_calibration_data", lambda v: path_or_paths(v), None,
        doc="folder of sample inputs (.npy, .npz, or JPEG/PNG with image_preprocess), or a list of "
            "such files: convert calibrates ranges from them (one step)"),
    Key("quantize_target_cosine", lambda v: _unit_float(v), None,
        doc="mixed precision: keep the fewest layers float until the quantized outputs' cosine "
            "on the calibration samples reaches this (docs/quantization.md)"),
    Key("quantize_schema", as_str, "", later="quantization"),
    Key("quantize_stat", as_flag, 0, doc="1: convert float for `run --quantize_stat` (as convert --quantize_stat)"),
    Key("change_concat_ranges", as_flag, 0, later="quantization"),
    Key("cl_mem_type", one_of(("image", "buffer")), "image", later="OpenCL buffers (images only now)"),
    Key("graph_optimize_options", list_of(as_str), [], doc="replace the pass list (names)"),
    Key("validation_threshold", parse_thresholds, {}, doc="{CPU: 0.999, GPU: 0.995, DSP: 0.98}"),
    Key("backend", as_str, "onnxruntime",
        doc="validation reference of ONNX models: onnxruntime; tensorflow, keras or tflite with "
            "original_model_file_path run that original in its framework; any other value (caffe2, "
            "pytorch) is named in a note and onnxruntime runs the ONNX file"),
    Key("accuracy_validation_script", lambda v: one_script(v), None,
        doc="MACE's AccuracyValidator plugin: `run` evaluates it over its data set (one file)"),
    Key("validation_inputs_data", list_of(as_str), [],
        doc=".npy files (or images, with image_preprocess), one per input; local paths or http(s) URLs"),
    Key("validation_inputs_data_sha256_checksum", list_of(lambda v: as_str(v).lower()), [],
        doc="pymace's: sha256 of each validation_inputs_data entry, in order; required for URLs "
            "(downloaded once into builds/downloads/, as model files)"),
    Key("validation_outputs_data", list_of(as_str), [], doc=".npy files, one per output; local paths or URLs"),
    Key("validation_outputs_data_sha256_checksum", list_of(lambda v: as_str(v).lower()), [],
        doc="pymace's: sha256 of each validation_outputs_data entry, in order; required for URLs"),
    Key("image_preprocess", lambda v: parse_image_preprocess(v), None,
        doc="pymace's: how JPEG/PNG files become inputs (resize, letterbox, center crop, channel_order, "
            "mean, std, scale, layout), one mapping for every input or input name -> mapping "
            "(docs/deployment_file.md, Images as inputs)"),
    Key("check_tensors", list_of(as_str), [], doc="tensors `run --validate` compares layer by layer"),
    Key("check_shapes", parse_fixed_shapes, [], doc="their shapes (framework layout), checked too"),
    Key("docker_image_tag", as_str, None, later="Caffe validation"),
    Key("dockerfile_path", as_str, None, later="Caffe validation"),
    Key("dockerfile_sha256_checksum", as_str, None, later="Caffe validation"),
    Key("accelerator_api", as_str, "", later="DSP backends"),
    Key("dsp_backend", as_str, None, doc="DSP backend name (entry point group pymace.dsp_backends)"),
    Key("micro", any_value, None, later="MCU backend"),
    Key("order", as_int, 0, doc="execution order of named subgraphs"),
    Key("placement", lambda v: parse_placement(v), None,
        doc="auto, or [{ops: <names|a..b|i:j>, runtime: cpu|gpu|dsp}] (docs/placement.md)"),
    Key("placement_preference", lambda v: parse_preference(v), [],
        doc="runtimes `placement: auto` tries, first first (default from runtime)"),
]

MODEL_KEYS = [
    Key("platform", one_of(PLATFORMS), required=True, doc="tensorflow, caffe, onnx or tflite"),
    Key("model_file_path", as_str, required=True, doc="local path or http(s) URL"),
    Key("model_sha256_checksum", lambda v: as_str(v).lower(), required=True),
    Key("weight_file_path", as_str, None, doc="Caffe .caffemodel"),
    Key("weight_sha256_checksum", lambda v: as_str(v).lower(), None),
    Key("subgraphs", any_value, required=True, doc="list (one graph) or dict name -> graph"),
    Key("original_model_file_path", as_str, None,
        doc="pymace's: the file an ONNX model was exported from (local path or URL); with backend "
            "tensorflow, keras or tflite, `run --validate` runs it as the reference"),
    Key("original_model_sha256_checksum", lambda v: as_str(v).lower(), None,
        doc="pymace's: its sha256 (required with original_model_file_path)"),
] + INHERITED_KEYS

SUBGRAPH_KEYS = [
    Key("input_tensors", as_str_list, required=True),
    Key("input_shapes", parse_shapes, required=True,
        doc="in input_data_formats order; a dimension may be a range lo..hi (-1..8: 1 to 8, converted at 1)"),
    Key("output_tensors", as_str_list, required=True),
    Key("output_shapes", parse_fixed_shapes, [], doc="checked against the converted model"),
    Key("input_data_formats", list_of(one_of(DATA_FORMATS, lower=False)), ["NHWC"]),
    Key("output_data_formats", list_of(one_of(DATA_FORMATS, lower=False)), ["NHWC"]),
    Key("input_aliases", as_str_list, []),
    Key("output_aliases", as_str_list, []),
    Key("original_input_tensors", as_str_list, [],
        doc="pymace's: the inputs' names in original_model_file_path, in input_tensors order (default: the same)"),
    Key("original_output_tensors", as_str_list, [],
        doc="pymace's: the outputs' names in original_model_file_path (default: the same)"),
] + INHERITED_KEYS


# ---- op placement (docs/placement.md) -----------------------------------------
PLACEMENT_RUNTIMES = ("cpu", "gpu", "dsp")
PLACEMENT_ALIASES = {"hexagon": "dsp"}
_SLICE = re.compile(r"(-?\d*):(-?\d*)")


def parse_op_item(v):
    """One op selection: ("index", i) | ("slice", start, stop) | ("range", first, last) | ("name", n)."""
    if isinstance(v, bool) or isinstance(v, (dict, list)):
        raise ValueError(f"expected an op name, index, 'first..last' or 'start:stop', got {v!r}")
    if isinstance(v, int):
        return ("index", v)
    s = str(v).strip()
    m = _SLICE.fullmatch(s)
    if m:
        return ("slice", int(m[1]) if m[1] else None, int(m[2]) if m[2] else None)
    if ".." in s:
        first, _, last = s.partition("..")
        if not (first.strip() or last.strip()):
            raise ValueError(f"'{s}': name at least one end of the range")
        return ("range", first.strip() or None, last.strip() or None)
    if not s:
        raise ValueError("empty op name")
    return ("name", s)


def parse_fp32_ops(v):
    """`auto`, or op names (a list or one comma-separated string)."""
    if isinstance(v, str) and v.strip().lower() == "auto":
        return "auto"
    return as_str_list(v)


def parse_placement(v):
    """`auto`, or a list of {ops: <selection or list of them>, runtime: cpu|gpu|dsp}."""
    if isinstance(v, str) and v.strip().lower() == "auto":
        return "auto"
    if not isinstance(v, list) or not v:
        raise ValueError(f"expected 'auto' or a list of {{ops: ..., runtime: ...}}, got {v!r}")
    rules = []
    for i, item in enumerate(v):
        if not isinstance(item, dict) or set(item) != {"ops", "runtime"}:
            raise ValueError(f"entry {i}: expected exactly the keys ops and runtime, got {item!r}")
        try:
            runtime = one_of(PLACEMENT_RUNTIMES, PLACEMENT_ALIASES)(item["runtime"])
            ops = item["ops"] if isinstance(item["ops"], list) else [item["ops"]]
            if not ops:
                raise ValueError("ops: empty list")
            rules.append({"ops": [parse_op_item(x) for x in ops], "runtime": runtime})
        except ValueError as e:
            raise ValueError(f"entry {i}: {e}") from None
    return rules


def parse_preference(v) -> list:
    items = list_of(one_of(PLACEMENT_RUNTIMES, PLACEMENT_ALIASES))(v)
    if len(set(items)) != len(items):
        raise ValueError(f"a runtime is listed twice in {items}")
    return items


def _choice_int(v, choices):
    n = as_int(v)
    if n not in choices:
        raise ValueError(f"expected one of {', '.join(map(str, choices))}, got {v!r}")
    return n


def key_table(keys) -> dict:
    return {k.name: k for k in keys}

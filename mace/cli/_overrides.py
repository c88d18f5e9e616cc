"""MACE's flags that override deployment-file keys: --target_abis, --target_socs (convert, build),
--model_graph_format, --model_data_format and 0.8's --build_type. Applied right after the file
is loaded, with the same checks the file's keys get; `config`-style origins name the flag."""
from __future__ import annotations

from mace.config import schema
from mace.errors import ConfigError

FORMATS = ("file", "code")
BUILD_TYPES = {"proto": ("file", "file"), "code": ("code", "code")}


def add_arguments(p, command: str) -> None:
    g = p.add_argument_group("deployment-file keys set from the command line (MACE's flags)")
    g.add_argument("--target_abis", default=None, metavar="ABIS",
                   help="override the .yml's target_abis (comma-separated)")
    if command in ("convert", "build"):  # run and benchmark have --target_socs as a device filter
        g.add_argument("--target_socs", default=None, metavar="SOCS",
                       help="override the .yml's target_socs (comma-separated)")
    if command != "build":
        g.add_argument("--model_graph_format", default=None, choices=FORMATS,
                       help="override the .yml's model_graph_format")
        g.add_argument("--model_data_format", default=None, choices=FORMATS,
                       help="override the .yml's model_data_format")
    if command != "convert":
        g.add_argument("--build_type", default=None, choices=sorted(BUILD_TYPES),
                       help="MACE 0.8: proto = graph and data as files, code = both as code")


def _set(config, key: str, raw, flag: str) -> None:
    parse = schema.key_table(schema.TOP_KEYS)[key].parse
    try:
        config.values[key] = parse(raw)
    except ValueError as e:
        raise ConfigError(f"{flag}: {e}") from None
    config.origin[key] = flag


def apply(config, args) -> None:
    """Write the flags given into the loaded DeploymentConfig."""
    build_type = getattr(args, "build_type", None)
    if build_type:
        graph, data = BUILD_TYPES[build_type]
        _set(config, "model_graph_format", graph, "--build_type")
        _set(config, "model_data_format", data, "--build_type")
    for key in ("model_graph_format", "model_data_format", "target_abis"):
        value = getattr(args, key, None)
        if value:
            _set(config, key, value, f"--{key}")
    if getattr(args, "command", None) in ("convert", "build") and getattr(args, "target_socs", None):
        _set(config, "target_socs", args.target_socs, "--target_socs")
    if config.model_graph_format == "file" and config.model_data_format == "code":
        raise ConfigError("--model_data_format code needs model_graph_format code too "
                          f"({config.path} says model_graph_format: file)")

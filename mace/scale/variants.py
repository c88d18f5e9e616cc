"""A model on another runtime: the deployment file's model converted again for cpu, gpu, dsp or
quantized (int8 on the CPU), so float and quantized results stand side by side.

The model as its .yml says is used from builds/<library>/ as built; any other variant is
converted (or built, for boards) into builds/<library>/variants/<variant>/, from a copy of the
deployment file whose subgraphs say that runtime (the data type its default, placement off).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

from mace.build import build_library
from mace.config import schema
from mace.config.files import library_dir
from mace.convert import convert_deployment
from mace.errors import ConfigError

VARIANTS = ("cpu", "gpu", "dsp", "quantized")


@dataclass
class Variant:
    name: str
    config: object          # DeploymentConfig (a copy for a converted variant)
    build_dir: Path | None
    converted: bool         # made here (False: the build the .yml describes)


def label(sg) -> str:
    """The variant a subgraph is: its runtime, or 'quantized' for an int8 CPU model."""
    return "quantized" if sg.quantize and sg.runtime == "cpu" else sg.runtime


def parse(text: str, where: str = "--runtimes") -> list:
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in VARIANTS]
    if bad or not names:
        raise ConfigError(f"{where} {text!r}: pick from {', '.join(VARIANTS)} (comma-separated)")
    return list(dict.fromkeys(names))


def retargeted(config, model_name: str, name: str):
    """A copy of `config` whose model `model_name` runs as variant `name`."""
    config = copy.deepcopy(config)
    model = config.models[model_name]
    runtime = "cpu" if name == "quantized" else name
    for sg in model.subgraphs + ([model.graph] if model.graph not in model.subgraphs else []):
        sg.values.update(runtime=runtime, data_type=schema.DEFAULT_DATA_TYPE[runtime],
                         quantize=int(name in ("quantized", "dsp")))
        if sg.values.get("placement"):
            sg.values["placement"] = None
    return config


def prepare(config, model, name: str, build_dir=None, package: bool = False, fresh: bool = False) -> Variant:
    """The variant ready to open: as built, or converted (`package`: built for devices too;
    `fresh`: the model as the .yml says is converted again too, as `sweep` does)."""
    if label(model.graph) == name:
        if fresh:
            (build_library if package else convert_deployment)(config, build_dir, [model.name])
        return Variant(name, config, Path(build_dir) if build_dir else None, fresh)
    variant_dir = library_dir(config, build_dir) / "variants" / name
    variant = retargeted(config, model.name, name)
    if package:
        build_library(variant, variant_dir, [model.name])
    else:
        convert_deployment(variant, variant_dir, [model.name])
    return Variant(name, variant, variant_dir, True)

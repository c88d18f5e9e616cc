"""Shared by the model-as-code tests: deployments for digits and a random-weight ONNX model."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from mace.config.files import code_dir
from mace.config.deployment import load_deployment
from mace.convert import convert_deployment
from mace.config.files import library_dir
from mace.runtime.engine import create_engine
from mace.runtime.from_code import create_engine_from_package
from tests.cli_helpers import DIGITS, digits_model, sha256


def digits_models() -> dict:
    model = digits_model()
    model["model_file_path"] = str(DIGITS / "digits_cnn.onnx")
    model["subgraphs"][0]["validation_inputs_data"] = [str(DIGITS / "inputs" / "image_0.npy")]
    return {"digits_cnn": model}


def squeezenet_models(tmp: Path) -> dict:
    import onnx

    from mace.testing.onnx_models import data_input, randomized

    model = randomized("squeezenet", seed=3)
    path = tmp / "squeezenet.onnx"
    onnx.save(model, str(path))
    name, shape = data_input(model)
    sg = {"input_tensors": name, "input_shapes": ",".join(map(str, shape)), "input_data_formats": "NCHW",
          "output_tensors": model.graph.output[0].name, "output_data_formats": "NONE"}
    return {"squeezenet": {"platform": "onnx", "model_file_path": str(path),
                           "model_sha256_checksum": sha256(path), "subgraphs": [sg], "runtime": "cpu"}}


def convert(tmp: Path, library: str, models: dict, graph="file", data="file", obfuscate=0):
    """Write a deployment file under tmp, convert it into tmp/builds; returns (config, library dir)."""
    tmp.mkdir(parents=True, exist_ok=True)
    models = {n: dict(m, obfuscate=obfuscate) for n, m in models.items()}
    path = tmp / "deploy.yml"
    path.write_text(yaml.safe_dump({"library_name": library, "target_abis": ["host"],
                                    "model_graph_format": graph, "model_data_format": data,
                                    "models": models}, sort_keys=False))
    config = load_deployment(path)
    convert_deployment(config, tmp / "builds")
    return config, library_dir(config, tmp / "builds")


def inputs_for(engine, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {n: rng.uniform(-1, 1, shape).astype(dtype) for n, (shape, dtype) in engine.input_specs().items()}


def outputs_of(config, lib: Path, model: str, seed: int = 0) -> dict:
    """Run the converted model the way its config says: the .pb or the generated package."""
    if config.model_graph_format == "code":
        engine = create_engine_from_package(code_dir(lib, config.library_name), model)
    else:
        engine = create_engine(lib / "model" / f"{model}.pb")
    return engine.run(inputs_for(engine, seed))

"""A converted model loaded for the report tools: engine, inputs and where things are.

Shared by benchmark, online report, layer validation, tensor dumps, debug and
visualize, so they all read the same files and feed the same inputs as `run`
(both open the engine with mace.runtime.open.open_engine).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mace.config.deployment import DeploymentConfig, ModelConfig
from mace.config.files import make_inputs
from mace.runtime.open import open_engine


@dataclass
class ModelSession:
    config: DeploymentConfig
    model: ModelConfig
    engine: object         # mace.runtime.backends.EngineApi
    inputs: dict           # caller's layout, as `run` makes them
    input_source: str
    pb_path: Path
    build_dir: Path | None
    notes: list

    @property
    def subgraph(self):
        return self.model.graph

    def artifact(self, suffix: str) -> Path:
        """builds/<library>/model/<model><suffix>, e.g. '_report.txt'."""
        return self.pb_path.with_name(f"{self.model.name}{suffix}")


def open_model(config: DeploymentConfig, model: ModelConfig, build_dir=None, input_dir=None,
               seed: int = 0, options: dict | None = None) -> ModelSession:
    """Load the model on its subgraph's runtime, as `run` does, with `run`'s inputs; `options`:
    engine options (e.g. `cpu_wait_policy`)."""
    opened = open_engine(config, model, build_dir, options=options)
    inputs, source = make_inputs(config, model.graph, input_dir, seed, build_dir)
    return ModelSession(config, model, opened.engine, inputs, source, opened.pb_path, build_dir, opened.notes)

"""A converted model loaded for the report tools: engine, inputs and where things are.

Shared by benchmark, online report, layer validation, tensor dumps and
visualize, so they all read the same files and feed the same inputs as `run`.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from mace.config.deployment import DeploymentConfig, ModelConfig
from mace.convert import library_dir, model_paths
from mace.errors import ConfigError
from mace.runtime.engine import Engine, create_engine


@dataclass
class ModelSession:
    config: DeploymentConfig
    model: ModelConfig
    engine: Engine
    inputs: dict           # caller's layout, as `run` makes them
    input_source: str
    pb_path: Path
    build_dir: Path | None

    @property
    def subgraph(self):
        return self.model.graph

    def artifact(self, suffix: str) -> Path:
        """builds/<library>/model/<model><suffix>, e.g. '_report.txt'."""
        return self.pb_path.with_name(f"{self.model.name}{suffix}")


def converted_paths(config: DeploymentConfig, model: ModelConfig, build_dir=None) -> tuple:
    pb_path, data_path = model_paths(config, model.name, build_dir)
    if not pb_path.exists():
        flag = f" --build_dir={build_dir}" if build_dir and Path(build_dir) != Path("builds") else ""
        raise ConfigError(f"model '{model.name}' has not been converted ({pb_path} is missing): "
                          f"run `python tools/converter.py convert --config={config.path}{flag}` first")
    return pb_path, data_path


def open_model(config: DeploymentConfig, model: ModelConfig, build_dir=None, input_dir=None,
               seed: int = 0) -> ModelSession:
    """Load the model on its subgraph's runtime, as `run` does (gpu / cpu+gpu: the OpenCL engine)."""
    from mace.run import make_inputs  # run imports the CLI-facing helpers; keep the cycle lazy
    from mace.runtime.gpu.deploy import engine_setup

    pb_path, data_path = converted_paths(config, model, build_dir)
    sg = model.graph
    if sg.runtime == "dsp":  # through its DspBackend, as `run` does
        from mace.runtime.dsp import backend_choice, create_dsp_engine
        backend, where = backend_choice(config, sg)
        engine = create_dsp_engine(pb_path, data_path, backend, where=where)
    else:
        device, options, _ = engine_setup(config, sg, build_dir)
        engine = create_engine(pb_path, data_path, device=device, options=options)
    inputs, source = make_inputs(config, model.graph, input_dir, seed)
    return ModelSession(config, model, engine, inputs, source, pb_path, build_dir)


def models_of(config: DeploymentConfig, names=None) -> list:
    """The ModelConfigs named (default: all), or a ConfigError naming the unknown one."""
    names = list(names or config.models)
    for n in names:
        if n not in config.models:
            raise ConfigError(f"{config.path}: no model named '{n}'; models: {', '.join(config.models)}")
    return [config.models[n] for n in names]


def thread_limit(num_threads: int):
    """BLAS threads for the block (as `run --omp_num_threads`); -1 or 0: the library default."""
    if not num_threads or num_threads < 0:
        return nullcontext()
    from threadpoolctl import threadpool_limits
    return threadpool_limits(limits=num_threads)


def model_dir(config: DeploymentConfig, build_dir=None) -> Path:
    return library_dir(config, build_dir) / "model"

"""`benchmark` of a deployment file's model on this host: open it as `run` does, measure
MACE's tables (mace/report/benchmark.py, which the device runner shares) and save them."""
from __future__ import annotations

from mace.report.benchmark import BenchmarkResult, benchmark_engine
from mace.report.offline import md5_of
from mace.report.session import open_model
from mace.runtime.affinity import thread_limit
from mace.util.jsonutil import dumps


def benchmark_model(config, model, build_dir=None, rounds: int = 10, input_dir=None, seed: int = 0,
                    num_threads: int = -1, save: bool = True, warmup: int = 1,
                    max_seconds: float | None = None, options: dict | None = None) -> BenchmarkResult:
    """Benchmark one converted model of a deployment file (`options`: engine options, e.g.
    `cpu_wait_policy`); with `save`, also write builds/<library>/model/<model>_benchmark.json
    (visualize draws its charts from it)."""
    with thread_limit(num_threads):
        session = open_model(config, model, build_dir, input_dir, seed, options)
        result = benchmark_engine(session.engine, session.inputs, rounds, warmup, model=model.name,
                                  runtime=session.subgraph.runtime, max_seconds=max_seconds)
    if save:  # the .pb's MD5 lets visualize ignore numbers measured on an older conversion
        data = {**result.to_dict(), "pb_md5": md5_of(session.pb_path)}
        session.artifact("_benchmark.json").write_text(dumps(data))
    return result

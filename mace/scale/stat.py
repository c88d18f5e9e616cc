"""`run --quantize_stat` over shards of the samples, in process or on Ray.

Each worker opens the float engine once (quantize.stat.stat_engine) and returns, for each
sample of its shard, the {tensor: (min, max)} that calibrate.collect_stats records. The driver
keeps them by sample index and writes the log in sample order, so the log is the one a
single-process run writes, byte for byte: per-sample minima and maxima are exact, and the
percentile / enhance reduction (`quantize_stat`) runs later on the whole log.
"""
from __future__ import annotations

from dataclasses import dataclass

from mace.quantize.calibrate import collect_stats
from mace.quantize.stat import stat_engine
from mace.runtime.affinity import thread_limit
from mace.scale.runner import run_shards
from mace.scale.shards import plan, shard_size


@dataclass
class StatJob:
    config: object
    model_name: str
    build_dir: object
    samples: list            # [{input: array}]: shipped once with the job (Ray's object store)
    num_threads: int = -1

    def open(self):
        return stat_engine(self.config, self.config.models[self.model_name], self.build_dir)

    def run(self, engine, shard) -> list:
        with thread_limit(self.num_threads):
            return [collect_stats(engine.graph, self.samples[s:e], engine) for s, e in shard.ranges]


def collect(config, model, build_dir, samples: list, cluster, num_threads: int = -1, progress=None,
            notify=None) -> list:
    """One {tensor: (min, max)} per sample, in sample order (as collect_stats)."""
    ranges = [(i, i + 1) for i in range(len(samples))]
    shards = plan(ranges, shard_size(len(ranges), cluster.workers if cluster.kind == "ray" else 1))
    per_sample = [None] * len(samples)
    seen = [0]

    def on_result(shard, blocks) -> None:
        for (start, _), stats in zip(shard.ranges, blocks):
            per_sample[start] = stats[0]
        seen[0] += shard.samples
        if progress:
            progress(seen[0], len(samples))

    run_shards(StatJob(config, model.name, build_dir, samples, num_threads), shards, cluster, on_result, notify)
    return per_sample

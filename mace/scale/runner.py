"""Where shards run: in this process, or on Ray workers (mace/scale/ray_pool.py).

A job is any picklable object with two methods:

    state = job.open()               # once per worker: load the engine, the user's script
    result = job.run(state, shard)   # one Shard; the result goes back to the driver

`run_shards(job, shards, cluster, on_result)` calls `on_result(shard, result)` on the driver
as shards finish (any order). Ray is imported only when `--cluster ray` asks for it and is
installed; without it the same shards run here and the returned notes say so.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
from dataclasses import dataclass, field

from mace.errors import ConfigError
from mace.util.invocation import install_hint

CLUSTERS = ("local", "ray")
# Test hook (docs/scale.md): "<shard>:exit" ends the worker process the first time it starts
# that shard (a marker file beside the shards remembers), "<shard>:raise" fails the shard.
FAIL_HOOK = "MACE_SCALE_FAIL_SHARD"


@dataclass
class Cluster:
    kind: str = "local"            # local: this process; ray: Ray workers
    address: str | None = None     # None: an embedded Ray on this machine
    workers: int = 2
    notes: list = field(default_factory=list)

    @property
    def describe(self) -> str:
        if self.kind == "local":
            return "in process"
        return f"Ray, {self.workers} worker(s), " + (f"cluster {self.address}" if self.address else "embedded")


def make_cluster(kind: str = "local", address: str | None = None, workers: int = 2) -> Cluster:
    """The cluster asked for; Ray missing: in process, with a note saying how to get it."""
    if kind not in CLUSTERS:
        raise ConfigError(f"--cluster {kind}: pick one of {', '.join(CLUSTERS)}")
    if workers < 1:
        raise ConfigError(f"--workers {workers}: must be at least 1")
    if address and kind != "ray":
        raise ConfigError("--ray_address needs --cluster ray")
    if kind == "ray" and importlib.util.find_spec("ray") is None:
        return Cluster("local", None, workers, [f"Ray is not installed ({install_hint('ray')}): running in process"])
    return Cluster(kind, address, workers)


def fail_hook() -> tuple | None:
    """(shard index, 'exit' | 'raise') from MACE_SCALE_FAIL_SHARD, read on the driver."""
    raw = os.environ.get(FAIL_HOOK)
    if not raw:
        return None
    index, _, mode = raw.partition(":")
    return int(index), mode or "raise"


def run_shards(job, shards: list, cluster: Cluster, on_result, notify=None) -> None:
    if not shards:
        return
    if cluster.kind == "ray":
        # start-up time: Ray loads only for --cluster ray (lazy import allowed in the arch test)
        from mace.scale import ray_pool
        ray_pool.run_shards(job, shards, cluster, on_result, notify or (lambda message: None))
        return
    state = job.open()
    for shard in shards:
        on_result(shard, job.run(state, shard))


def run_tasks(tasks: list, cluster: Cluster, resource_of, progress=None) -> list:
    """Call each task (a picklable callable); on Ray each holds one unit of the custom resource
    `resource_of(task)` (a device), so tasks on one device run one at a time. Results in order."""
    if cluster.kind == "ray":
        from mace.scale import ray_pool   # start-up time: Ray loads only for --cluster ray
        return ray_pool.run_tasks(tasks, resource_of, progress)
    results = []
    for task in tasks:
        results.append(task())
        if progress:
            progress(len(results))
    return results


@contextlib.contextmanager
def session(cluster: Cluster, resources: dict | None = None):
    """Start Ray once for several loops (each variant, each sweep job); local: nothing to do.
    `resources`: custom resources of an embedded Ray (the sweep's devices)."""
    if cluster.kind != "ray":
        yield
        return
    from mace.scale import ray_pool   # start-up time: Ray loads only for --cluster ray
    started = ray_pool.start(cluster, resources)
    try:
        yield
    finally:
        if started:
            ray_pool.stop()

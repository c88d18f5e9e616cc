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
from mace.util.cpu_contention import usable_cores
from mace.util.invocation import install_hint

CLUSTERS = ("local", "ray")
ADDRESS_ENV = "RAY_ADDRESS"   # Ray's own variable: ray.init() joins the cluster it names
# Test hook (docs/scale.md): "<shard>:exit" ends the worker process the first time it starts
# that shard (a marker file beside the shards remembers), "<shard>:raise" fails the shard.
FAIL_HOOK = "MACE_SCALE_FAIL_SHARD"


@dataclass
class Cluster:
    kind: str = "local"            # local: this process; ray: Ray workers
    address: str | None = None     # None: an embedded Ray on this machine
    workers: int = 2
    notes: list = field(default_factory=list)
    source: str = "--ray_address"  # where the address came from: the flag or RAY_ADDRESS

    @property
    def named(self) -> str:
        """The address as the user gave it, for messages."""
        if self.source == ADDRESS_ENV:
            return f"{ADDRESS_ENV}={self.address} (from the environment)"
        return f"{self.source} {self.address}"

    @property
    def describe(self) -> str:
        if self.kind == "local":
            return "in process"
        return f"Ray, {self.workers} worker(s), " + (f"cluster {self.address}" if self.address else "embedded")


def make_cluster(kind: str = "local", address: str | None = None, workers: int = 2,
                 source: str = "--ray_address") -> Cluster:
    """The cluster asked for; Ray missing: in process, with a note saying how to get it.
    `source`: where `address` came from (the flag, or RAY_ADDRESS: see address_of)."""
    if kind not in CLUSTERS:
        raise ConfigError(f"--cluster {kind}: pick one of {', '.join(CLUSTERS)}")
    if workers < 1:
        raise ConfigError(f"--workers {workers}: must be at least 1")
    if address and kind != "ray":
        raise ConfigError("--ray_address needs --cluster ray")
    if kind == "ray" and importlib.util.find_spec("ray") is None:
        return Cluster("local", None, workers, [f"Ray is not installed ({install_hint('ray')}): running in process"])
    if address == "local":   # Ray's word for "start one here": ours, on loopback only
        address = None
    cluster = Cluster(kind, address, workers, source=source)
    if address is not None:
        check_address(cluster)
        if source == ADDRESS_ENV:   # not asked for on the command line: say where the work goes
            cluster.notes.append(f"joining the Ray cluster at {cluster.named}")
    elif kind == "ray":
        _cap_at_cpus(cluster)
    return cluster


def address_of(flag: str | None, environ) -> tuple:
    """(address, source) as ray.init would take them: RAY_ADDRESS, where set, stands for a missing
    --ray_address or `auto` (Ray's rule). Passed down from the CLI: ray.init itself never sees
    an address of None (ray_pool starts an embedded Ray as `local`)."""
    env = (environ.get(ADDRESS_ENV) or "").strip()
    if env and flag in (None, "auto"):
        return env, ADDRESS_ENV
    return flag, "--ray_address"


def check_address(cluster: Cluster) -> None:
    """`auto`, `host:port` or `ray://host:port` (port 1..65535); anything else is refused here,
    before Ray turns it into an internal ValueError or minutes of retries."""
    if cluster.address == "auto":
        return
    scheme, sep, rest = cluster.address.partition("://")
    target = rest if sep else cluster.address
    host, colon, port = target.rpartition(":")
    good_scheme = not sep or scheme == "ray"
    if not (good_scheme and colon and host.strip("[]") and port.isdigit() and 1 <= int(port) <= 65535) \
            or any(c.isspace() for c in target):
        raise ConfigError(f"{cluster.named}: expected host:port (the head's GCS, e.g. head:6379), "
                          f"ray://host:port (Ray Client, e.g. ray://head:10001), auto (the cluster "
                          f"this machine is a node of) or local (an embedded Ray)")


def _cap_at_cpus(cluster: Cluster) -> None:
    """An embedded Ray has this machine's CPUs: more workers than that only queue (and declaring
    them to Ray lets that many sweep jobs run at once)."""
    cpus = usable_cores()
    if cluster.workers > cpus:
        cluster.notes.append(f"--workers {cluster.workers}: capped at {cpus}, the CPUs this machine "
                             f"gives this process (an embedded Ray)")
        cluster.workers = cpus


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
def session(cluster: Cluster, resources: dict | None = None, notify=None):
    """Start Ray once for several loops (each variant, each sweep job); local: nothing to do.
    `resources`: custom resources of an embedded Ray (the sweep's devices); `notify(message)`
    hears the notes that joining a cluster adds (--workers capped at its CPUs)."""
    if cluster.kind != "ray":
        yield
        return
    from mace.scale import ray_pool   # start-up time: Ray loads only for --cluster ray
    known = len(cluster.notes)
    started = ray_pool.start(cluster, resources)
    for note in cluster.notes[known:]:
        (notify or (lambda message: None))(note)
    try:
        yield
    finally:
        if started:
            ray_pool.stop()

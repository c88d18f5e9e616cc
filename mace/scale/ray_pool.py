"""Shards on Ray actors: one actor per worker opens the job once, then takes shard after shard.

Fault model (docs/scale.md): a worker process that dies (killed, out of memory, its node lost)
surfaces as RayActorError on the shard it held; that shard goes back to the front of the
queue and a fresh actor takes the dead one's place, up to MAX_ATTEMPTS tries per shard. An
exception raised by the job itself (the user's script, a bad input) is not retried: the run
stops with it, and the shards that finished stay on disk for a resumed run. The only module
that imports ray.
"""
from __future__ import annotations

import contextlib
import os
import socket
from collections import deque
from pathlib import Path

import ray
from ray._private import ray_constants   # ENABLE_RAY_CLUSTER: see _single_machine
from ray.exceptions import RayActorError, RayTaskError

import mace
from mace.errors import MaceError, ModelError

MAX_ATTEMPTS = 3
LOOPBACK = "127.0.0.1"   # the node address of an embedded Ray: nothing listens on the network


class _Worker:
    def __init__(self, job):
        self.job, self.state, self.failed = job, None, None
        try:
            self.state = job.open()
        except Exception as e:   # raised by run(): of a failed __init__ Ray keeps only the message
            self.failed = e

    def run(self, shard):
        if self.failed is not None:
            raise self.failed
        return self.job.run(self.state, shard)


_RemoteWorker = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(_Worker)


def start(cluster, resources: dict | None = None) -> bool:
    """ray.init for the cluster; returns whether this call started it (and so shuts it down).
    An embedded Ray (no address) is this machine only: every port it opens is on 127.0.0.1.
    Joining a cluster caps cluster.workers at its CPUs, with a note in cluster.notes."""
    if ray.is_initialized():
        return False
    source_root = str(Path(mace.__file__).resolve().parent.parent)
    env = {"PYTHONPATH": os.pathsep.join(p for p in (source_root, os.environ.get("PYTHONPATH")) if p)}
    if cluster.address:   # an existing cluster: mace is installed on its nodes (docs/scale.md)
        _check_reachable(cluster)
        _join(cluster)
        _cap_at_cluster_cpus(cluster)
    else:   # address "local": a RAY_ADDRESS in the environment must not make this a join
        with _single_machine():
            ray.init(address="local", num_cpus=cluster.workers, resources=resources or None,
                     include_dashboard=False, _node_ip_address=LOOPBACK, logging_level="ERROR",
                     log_to_driver=False, runtime_env={"env_vars": env})
    return True


CONNECT_TIMEOUT_S = 5.0   # one TCP connect to --ray_address before Ray's own minutes of retries


def _check_reachable(cluster) -> None:
    """A `host:port` or `ray://host:port` nothing answers at is one clear error within seconds;
    ray.init would retry for minutes first. `auto` is left to Ray."""
    host, sep, port = cluster.address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise MaceError(f"{cluster.named}: no Ray cluster answers at {host}:{port} "
                        f"({e.strerror or e}); check the address and that the cluster's head is up, "
                        f"or {_without(cluster)} to run on this machine only") from None


def _without(cluster) -> str:
    return "unset RAY_ADDRESS" if cluster.source == "RAY_ADDRESS" else "leave --ray_address out"


def _join(cluster) -> None:
    """ray.init(address): what Ray refuses (nothing at `auto`, a port that is no Ray's, a version
    mismatch) is one error naming the address, not an internal error."""
    try:
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    except Exception as e:   # ConnectionError, ValueError, RuntimeError, Ray's own: all of them Ray's refusal
        ray.shutdown()
        if cluster.address == "auto" and isinstance(e, ConnectionError):
            raise MaceError(f"{cluster.named}: no Ray cluster runs on this machine (start one with "
                            f"`ray start --head`), or {_without(cluster)} for an embedded Ray") from None
        said = (str(e).strip().splitlines() or [""])[0][:300]
        raise MaceError(f"{cluster.named}: Ray could not join that cluster: {type(e).__name__}: {said}") from None


def _cap_at_cluster_cpus(cluster) -> None:
    cpus = int(ray.cluster_resources().get("CPU", 0))
    if 0 < cpus < cluster.workers:
        cluster.notes.append(f"--workers {cluster.workers}: capped at {cpus}, the CPUs of the cluster "
                             f"at {cluster.named}")
        cluster.workers = cpus


@contextlib.contextmanager
def _single_machine():
    """Ray's ports take jobs from anyone who reaches them (no authentication). Given 127.0.0.1 as
    the node address, Ray's servers bind to loopback only -- but ray.init replaces 127.0.0.1 with
    the machine's reachable address (so that other nodes could join) unless Ray runs without
    clusters, as it does by default on Windows and macOS (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0,
    read once at import into ray_constants.ENABLE_RAY_CLUSTER). That is what an embedded Ray is:
    the flag is cleared while ray.init starts the node (the processes it starts take their
    address from it) and restored after, so a later --ray_address in this process still joins
    a real cluster. tests/scale/test_ray_local.py checks that nothing listens elsewhere."""
    saved = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved


def stop() -> None:
    ray.shutdown()


def _error(shard, e: RayTaskError) -> MaceError:
    cause = getattr(e, "cause", None)
    if isinstance(cause, MaceError):
        return cause
    what = f"{type(cause).__name__}: {cause}" if cause is not None else str(e).splitlines()[0]
    return ModelError(f"shard {shard.index} (samples {shard.ranges[0][0]}..{shard.ranges[-1][1]}) "
                      f"failed on a Ray worker: {what}")


def run_shards(job, shards: list, cluster, on_result, notify) -> None:
    started = start(cluster)
    try:
        _dispatch(job, shards, cluster.workers, on_result, notify)
    finally:
        if started:
            ray.shutdown()


def _dispatch(job, shards, workers: int, on_result, notify) -> None:
    if len(shards) < workers:   # a worker per shard at most: the rest would only load the engine
        notify(f"--workers {workers}: {len(shards)} started, one per shard of samples "
               f"({len(shards)} shard(s) to run)")
    actors = [_RemoteWorker.remote(job) for _ in range(min(workers, len(shards)))]
    pending, inflight, attempts = deque(shards), {}, {}

    def submit(slot: int) -> None:
        shard = pending.popleft()
        attempts[shard.index] = attempts.get(shard.index, 0) + 1
        inflight[actors[slot].run.remote(shard)] = (slot, shard)

    for slot in range(len(actors)):
        submit(slot)
    while inflight:
        ready, _ = ray.wait(list(inflight), num_returns=1)
        slot, shard = inflight.pop(ready[0])
        try:
            result = ray.get(ready[0])
        except RayActorError as e:   # the worker process died: re-run its shard on a new one
            if attempts[shard.index] >= MAX_ATTEMPTS:
                raise ModelError(f"shard {shard.index}: its worker died {MAX_ATTEMPTS} times "
                                 f"(last: {str(e).splitlines()[0]})") from None
            notify(f"worker {slot} died running shard {shard.index}; re-running it on a new worker")
            actors[slot] = _RemoteWorker.remote(job)
            pending.appendleft(shard)
            submit(slot)
            continue
        except RayTaskError as e:
            _stop(actors)   # ray.cancel(force=True) is refused for actor tasks: it hid this error
            raise _error(shard, e) from None
        on_result(shard, result)
        if pending:
            submit(slot)


def _stop(actors) -> None:
    """End the workers still running shards of a run that failed (a joined cluster outlives it)."""
    for actor in actors:
        with contextlib.suppress(Exception):
            ray.kill(actor, no_restart=True)


@ray.remote
def _call(task):
    return task()


def run_tasks(tasks: list, resource_of, progress=None) -> list:
    """Each task as a Ray task holding one unit of its resource (a device); results in order.
    Host jobs take a CPU, board jobs none (they wait on the board)."""
    refs = [_call.options(num_cpus=1 if resource_of(t).endswith(":host") else 0,
                          resources={resource_of(t): 1}).remote(t) for t in tasks]
    index = {ref: i for i, ref in enumerate(refs)}
    results, waiting = [None] * len(refs), list(refs)
    while waiting:
        ready, waiting = ray.wait(waiting, num_returns=1)
        try:
            results[index[ready[0]]] = ray.get(ready[0])
        except RayTaskError as e:
            cause = getattr(e, "cause", None)
            raise cause if isinstance(cause, MaceError) else ModelError(f"sweep job failed on Ray: {cause or e}")
        if progress:
            progress(len(refs) - len(waiting))
    return results

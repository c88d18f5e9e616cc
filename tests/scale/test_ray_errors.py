"""`--cluster ray` through the real CLI where the user gets something wrong (issue 38): a worker's
exception is the user's error naming the method and the samples (ray.cancel(force=True) on an
actor task used to replace it with an internal ValueError), RAY_ADDRESS is checked as
--ray_address is, addresses Ray cannot parse are refused before Ray sees them, and --workers is
capped, saying so."""
from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from mace.errors import ConfigError
from mace.scale.runner import make_cluster
from mace.util.cpu_contention import usable_cores
from tests.cli_helpers import cli, digits_model, workdir, write_deployment
from tests.mace_compat.test_accuracy_script_errors import refused, script_text

pytest.importorskip("ray", reason="Ray is the optional extra [ray]: pip install -e '.[ray]'")


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    work = workdir(tmp_path_factory.mktemp("ray_errors"))
    write_deployment(work / "acc.yml", {"digits_cnn": digits_model(accuracy_validation_script="acc.py")})
    r = cli("convert", "--config=acc.yml", cwd=work)
    assert r.returncode == 0, r.stderr
    return work


def on_ray(work, text: str, *flags, env=None):
    (work / "acc.py").write_text(text)
    environ = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return cli("run", "--config=acc.yml", "--cluster", "ray", *flags, cwd=work, env={**environ, **(env or {})},
               timeout=300)


def test_a_workers_exception_is_the_users_error(work):
    r = on_ray(work, script_text(preprocess="def preprocess(self, start, end, **kwargs):\n"
                                            "    raise ValueError('label file missing for %d' % start)"))
    err = refused(r, "acc.yml: models.digits_cnn", "acc.py: AccuracyValidator.preprocess(",
                  "raised ValueError: label file missing for", "raise ValueError('label file missing")
    assert "force=True" not in err and "Traceback (most recent call last)" in err


def test_os_exit_on_a_worker_is_the_users_error_not_a_dead_worker(work):
    # a hard exit killed the worker: retried 3 times, then "its worker died", naming no method
    r = on_ray(work, script_text(preprocess="def preprocess(self, start, end, **kwargs):\n    hard_exit(4)"))
    refused(r, "AccuracyValidator.preprocess(", "called os._exit(4)")
    assert "died" not in r.stderr


def test_a_script_failing_to_load_on_the_workers_only(work):
    # the driver loads it fine; Ray keeps only the message of a failed actor __init__
    top = "if 'default_worker' in sys.argv[0]:\n    raise ImportError('no cv3 on this node')"
    refused(on_ray(work, script_text(top)), "acc.py failed to load: ImportError", "no cv3 on this node")


def test_workers_are_capped_at_the_cpus_and_the_shards(work):
    r = on_ray(work, script_text(), "--workers", "100000")
    assert r.returncode == 0, r.stderr
    out = r.stdout + r.stderr
    assert "--workers 100000: capped at" in out and "the CPUs this machine gives this process" in out
    assert (work / "builds/digits/digits_cnn_accuracy.json").is_file()
    if usable_cores() >= 2:   # one sample, one shard: one worker, not two
        r = on_ray(work, script_text(sample_size="def sample_size(self):\n    return 1"), "--workers", "2")
        assert r.returncode == 0, r.stderr
        assert "--workers 2: 1 started, one per shard of samples" in r.stdout + r.stderr


def test_ray_address_in_the_environment_is_checked_as_the_flag_is(work):
    with socket.socket() as s:   # bound, never listening: nothing answers
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        start = time.monotonic()
        refused(on_ray(work, script_text(), env={"RAY_ADDRESS": f"127.0.0.1:{port}"}),
                f"RAY_ADDRESS=127.0.0.1:{port} (from the environment): no Ray cluster answers at",
                "unset RAY_ADDRESS")
        assert time.monotonic() - start < 60
    r = on_ray(work, script_text(), env={"RAY_ADDRESS": "garbage"})
    refused(r, "RAY_ADDRESS=garbage (from the environment): expected host:port")
    assert "Run model" not in r.stdout   # refused before the model runs, as other flags are
    # --ray_address local wins over the environment: an embedded Ray, on loopback
    r = on_ray(work, script_text(), "--ray_address", "local", "--workers", "1", env={"RAY_ADDRESS": "garbage"})
    assert r.returncode == 0, r.stderr


def test_ray_address_means_nothing_to_the_local_cluster(work):
    (work / "acc.py").write_text(script_text())
    r = cli("run", "--config=acc.yml", cwd=work, env={**os.environ, "RAY_ADDRESS": "garbage"})
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("address", ["garbage", "ray://", ":6379", "head:99999", "head:0", "http://head:8265",
                                     "head: 6379", "ray://head"])
def test_addresses_ray_cannot_take_are_refused_before_ray(address):
    with pytest.raises(ConfigError, match="expected host:port"):
        make_cluster("ray", address, 1)


@pytest.mark.parametrize("address", ["auto", "head:6379", "ray://head:10001", "10.0.0.1:6379", "[::1]:6379"])
def test_addresses_ray_takes(address):
    assert make_cluster("ray", address, 1).address == address


def _a_ray_runs_here() -> bool:
    """`auto` joins any Ray running on this machine (another test's embedded one too)."""
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == "gcs_server":
                return True
        except OSError:
            continue
    return False


def test_auto_without_a_cluster_is_one_error(work):
    if _a_ray_runs_here():
        pytest.skip("a Ray runs on this machine: `auto` would join it")
    refused(on_ray(work, script_text(), "--ray_address", "auto"),
            "--ray_address auto: no Ray cluster runs on this machine")

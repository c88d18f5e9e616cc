"""An embedded Ray (`--cluster ray` without --ray_address) is this machine only: Ray's ports take
jobs without authentication, so every socket its processes listen on must be on 127.0.0.1
(ray.init alone binds them to all interfaces and reports the machine's network address).
Checked from /proc: the listening TCP sockets of the driver and every process it started."""
from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")
if not Path("/proc/net/tcp").exists():
    pytest.skip("reads the sockets from /proc (Linux)", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]

DRIVER = """
import json, os, sys
sys.path.insert(0, {root!r})
import ray
from mace.scale import ray_pool
from mace.scale.runner import make_cluster
from tests.scale.test_ray_local import listening, descendants

assert ray_pool.start(make_cluster("ray", None, 1))
worker_ip = ray.get(ray.remote(lambda: ray.util.get_node_ip_address()).remote())
pids = descendants(os.getpid())
print(json.dumps({{"worker_ip": worker_ip, "sockets": listening(pids), "processes": len(pids)}}))
ray_pool.stop()
"""


def descendants(pid: int) -> set:
    """pid and every process below it."""
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue   # the process is gone
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        found.add(p)
        todo += children.get(p, [])
    return found


def _address(hex_address: str) -> str:
    """/proc/net/tcp{,6}'s address: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(words)
    return str(ip.ipv4_mapped or ip) if ip.version == 6 else str(ip)


def listening(pids) -> list:
    """[(pid, process name, address, port)] of the TCP sockets `pids` listen on."""
    owner = {}
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:["):
                    owner[int(link[8:-1])] = pid
        except OSError:
            continue
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and int(fields[9]) in owner:   # 0A: LISTEN
                host, port = fields[1].split(":")
                pid = owner[int(fields[9])]
                name = Path(f"/proc/{pid}/comm").read_text().strip() if Path(f"/proc/{pid}").exists() else "?"
                found.append((pid, name, _address(host), int(port, 16)))
    return found


def test_an_embedded_ray_listens_on_loopback_only():
    r = subprocess.run([sys.executable, "-c", DRIVER.format(root=str(ROOT))], capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report["worker_ip"] == "127.0.0.1"   # what the workers report: no network address
    sockets = report["sockets"]
    assert len(sockets) >= 3, report          # the GCS, the raylet, workers: the check saw them
    exposed = [s for s in sockets if not ipaddress.ip_address(s[2]).is_loopback]
    assert not exposed, f"listening beyond 127.0.0.1: {exposed}"


def test_an_unreachable_ray_address_fails_within_seconds():
    # issue 38: ray.init retried for 150+ s before saying anything
    import socket
    import time

    from mace.errors import MaceError
    from mace.scale import ray_pool
    from mace.scale.runner import make_cluster

    with socket.socket() as s:   # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        start = time.monotonic()
        for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
            with pytest.raises(MaceError, match=f"--ray_address {address}: no Ray cluster answers at "
                                                f"127.0.0.1:{port}"):
                ray_pool.start(make_cluster("ray", address, 1))
        assert time.monotonic() - start < 2 * ray_pool.CONNECT_TIMEOUT_S

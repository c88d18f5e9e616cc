"""A real OpenSSH server on 127.0.0.1 for the device tests, set up in a temporary folder.

Debian's openssh-server is installed when sshd is missing (CI runs as root with apt); sshd then
runs on a free port with its own sshd_config, a generated host key and a throw-away user key,
all in the folder: /etc/ssh is never read or changed. `ensure_sshd()` says why when it cannot.
"""
from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

SSHD = "/usr/sbin/sshd"


def ensure_sshd() -> str | None:
    """None when sshd is there (installing it if needed), else the reason it is not."""
    if Path(SSHD).is_file():
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return "sshd is not installed and apt-get as root is not available to install it"
    # two pytest workers may get here at once; dpkg allows one install at a time
    with FileLock(os.path.join(tempfile.gettempdir(), "mace-test-openssh-install.lock")):
        if Path(SSHD).is_file():
            return None
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        install = ["apt-get", "install", "-y", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=120",
                   "openssh-server"]
        done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:  # the package lists may be missing or stale
            subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=300)
            done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or not Path(SSHD).is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["?"]
            return f"installing openssh-server failed: {tail[0]}"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True,
                   capture_output=True, timeout=30)
    return path


@dataclass
class SshServer:
    port: int
    user: str
    key: Path            # accepted private key
    wrong_key: Path      # a key sshd does not know
    folder: Path
    log: Path


CONFIG = """Port {port}
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile {folder}/sshd.pid
AuthorizedKeysFile {folder}/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
UseDNS no
{sftp}LogLevel ERROR
"""


@contextlib.contextmanager
def ssh_server(folder: Path, sftp: bool = True):
    """Start sshd for the current user; yields an SshServer, stops sshd at the end.
    `sftp=False`: no `Subsystem sftp` line, as on a board without an sftp server (scp then
    needs its legacy protocol)."""
    folder.mkdir(parents=True, exist_ok=True)
    host_key, key, wrong = keygen(folder / "host_key"), keygen(folder / "id_user"), keygen(folder / "id_wrong")
    (folder / "authorized_keys").write_text(key.with_suffix(".pub").read_text())
    port = free_port()
    (folder / "sshd_config").write_text(CONFIG.format(
        port=port, host_key=host_key, folder=folder, sftp="Subsystem sftp internal-sftp\n" if sftp else ""))
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation folder
    log = folder / "sshd.log"
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(folder / "sshd_config")], stdout=subprocess.DEVNULL,
                            stderr=open(log, "w"))
    try:
        _wait_for_banner(port, proc, log)
        yield SshServer(port, getpass.getuser(), key, wrong, folder, log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _wait_for_banner(port: int, proc, log: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {log.read_text()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            if s.recv(64).startswith(b"SSH-"):
                return
        time.sleep(0.05)
    raise RuntimeError(f"sshd did not answer on port {port}: {log.read_text()}")

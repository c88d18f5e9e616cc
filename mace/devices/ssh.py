"""An ARM Linux board (or any machine) reached with the system's ssh and scp.

Commands are argument lists: no local shell. On the board, sshd hands the command line to the
login shell, so each argument is quoted with shlex there (a path with a space stays one
argument). BatchMode makes a missing key fail at once instead of asking for a password;
StrictHostKeyChecking=accept-new trusts a board the first time and refuses it if its key
changes later; new keys go to <build_dir>/known_hosts, so running here never edits
~/.ssh/known_hosts (which is still read: keys you trust already are checked).
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from mace.devices import process
from mace.devices.base import Device, DeviceError

# ssh's own failures (exit status 255) -> what to tell the user
HINTS = (
    ("Connection refused", "connection refused: is sshd running there, and is the port right?"),
    ("banner exchange", "connected, but no ssh server answered in time (--device_timeout): is the port "
                        "right, is the board overloaded?"),
    ("Connection timed out", "connection timed out: is the address right and the board on?"),
    ("No route to host", "no route to host: is the board on this network?"),
    ("Could not resolve hostname", "unknown host name"),
    ("Permission denied", "the login was refused ({detail}): set up password-less login with "
                          "`cat ~/.ssh/id_rsa.pub | ssh {user}@{address} \"cat >> ~/.ssh/authorized_keys\"` "
                          "or name the key with identity_file in the devices .yml"),
    ("Host key verification failed", "its host key changed since it was first trusted: if the board "
                                     "was reinstalled, remove its line from {known_hosts}"),
)


@dataclass
class SshDevice(Device):
    address: str = ""
    username: str = ""
    port: int = 22
    identity_file: str | None = None
    known_hosts: Path | None = None     # set by the caller: <build_dir>/known_hosts

    def lock_id(self) -> str:
        return f"ssh-{self.username}@{self.address}-{self.port}"

    def describe(self) -> str:
        return f"ssh {self.username}@{self.address}:{self.port}"

    # ---- commands ---------------------------------------------------------------------
    def _options(self, timeout: float) -> list:
        opts = ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new",
                "-o", f"ConnectTimeout={max(1, min(int(timeout), 30))}",
                # a link cut mid-transfer ends in ~15 s instead of hanging until the timeout
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
                "-o", "LogLevel=ERROR"]
        if self.known_hosts:
            opts += ["-o", f"UserKnownHostsFile=\"{self.known_hosts}\" ~/.ssh/known_hosts"]
        if self.identity_file:
            opts += ["-i", self.identity_file, "-o", "IdentitiesOnly=yes"]
        return opts

    def _remote(self, path: str) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.username}@{host}:{path}"

    def shell(self, argv: list, timeout: float, step: str):
        cmd = ["ssh", *self._options(timeout), "-p", str(self.port), "--",
               f"{self.username}@{self.address}", shlex.join(argv)]
        done = process.run(cmd, timeout, self.name, step)
        if done.returncode == 255:
            raise self._failure(done, step)
        return done

    def push(self, files: list, remote_dir: str, timeout: float, step: str) -> None:
        self._scp([str(f) for f in files], self._remote(remote_dir.rstrip("/") + "/"), timeout, step)

    def pull(self, remote_files: list, local_dir, timeout: float, step: str) -> None:
        self._scp([self._remote(f) for f in remote_files], str(local_dir), timeout, step)

    def _scp(self, sources: list, dest: str, timeout: float, step: str) -> None:
        base = ["scp", "-q", *self._options(timeout), "-P", str(self.port)]
        done = process.run([*base, "--", *sources, dest], timeout, self.name, step)
        if done.returncode != 0 and "subsystem request failed" in done.stderr:
            # boards without sftp-server (dropbear, busybox): the legacy scp protocol
            done = process.run([*base, "-O", "--", *sources, dest], timeout, self.name, step)
        if done.returncode != 0:
            raise self._failure(done, step)

    def _failure(self, done, step: str) -> DeviceError:
        text = done.stderr
        for needle, hint in HINTS:
            if needle in text:
                detail = text[text.find(needle):].splitlines()[0].strip()
                return DeviceError(self.name, step, f"{self.describe()}: " + hint.format(
                    detail=detail, user=self.username, address=self.address, known_hosts=self.known_hosts
                    or "~/.ssh/known_hosts"))
        return DeviceError(self.name, step, f"{self.describe()}: {done.last_line()}")

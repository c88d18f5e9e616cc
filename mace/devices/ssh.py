"""An ARM Linux board (or any machine) reached with the system's ssh and scp.

Commands are argument lists: no local shell. On the board, sshd hands the command line to the
login shell, so each argument is quoted with shlex there (a path with a space stays one
argument). BatchMode makes a missing key fail at once instead of asking for a password;
StrictHostKeyChecking=accept-new trusts a board the first time and refuses it if its key
changes later; new keys go to <build_dir>/known_hosts, so running here never edits
~/.ssh/known_hosts (which is still read: keys you trust already are checked).

Files move with scp. Its two protocols treat a remote path differently: over sftp (OpenSSH 9's
default) no shell sees it, but the sftp side expands glob characters, so those are escaped with
a backslash; the legacy protocol (`scp -O`, for boards without an sftp server: dropbear,
busybox, sshd without a `Subsystem sftp` line) hands it to the remote shell, so it is quoted
with shlex and the client's own file-name check, which does not understand the quoting, is
turned off (`-T`; target_run checks each pulled file's sha256 instead). Which protocol a board
speaks is found on the first transfer that fails the sftp way (a probe of the sftp subsystem
tells "no sftp server" from a dropped link) and remembered for the device.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
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

# What scp says when the sftp subsystem is missing: OpenSSH's sshd closes the channel
# ("scp: Connection closed"); others refuse the request ("subsystem request failed")
NO_SFTP = ("subsystem request failed", "Connection closed")
SFTP_GLOB = re.compile(r"[\\*?\[\]{}]")   # what sftp's remote glob would expand


@dataclass
class SshDevice(Device):
    address: str = ""
    username: str = ""
    port: int = 22
    identity_file: str | None = None
    known_hosts: Path | None = None     # set by the caller: <build_dir>/known_hosts
    # None: not known yet; True: the board has no sftp server, scp speaks the legacy protocol
    legacy_scp: bool | None = field(default=None, compare=False)

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
            # ssh_config quotes a value with spaces in double quotes and has no escape for '"'
            if '"' in str(self.known_hosts):
                raise DeviceError(self.name, "ssh options", f"the build folder path {str(self.known_hosts)!r} "
                                  "holds a '\"', which ssh cannot take in UserKnownHostsFile; move it")
            opts += ["-o", f"UserKnownHostsFile=\"{self.known_hosts}\" ~/.ssh/known_hosts"]
        if self.identity_file:
            opts += ["-i", self.identity_file, "-o", "IdentitiesOnly=yes"]
        return opts

    def _remote(self, path: str, legacy: bool) -> str:
        """user@host:path as scp wants it for the protocol in use (see the module's docstring)."""
        host = f"[{self.address}]" if ":" in self.address else self.address
        quoted = shlex.quote(path) if legacy else SFTP_GLOB.sub(r"\\\g<0>", path)
        return f"{self.username}@{host}:{quoted}"

    def _login(self) -> list:
        return ["-p", str(self.port), "--", f"{self.username}@{self.address}"]

    def shell(self, argv: list, timeout: float, step: str):
        cmd = ["ssh", *self._options(timeout), *self._login(), shlex.join(argv)]
        done = process.run(cmd, timeout, self.name, step)
        if done.returncode == 255:
            raise self._failure(done, step)
        return done

    def push(self, files: list, remote_dir: str, timeout: float, step: str) -> None:
        self._scp(lambda legacy: [*map(_local, files), self._remote(remote_dir.rstrip("/") + "/", legacy)],
                  timeout, step)

    def pull(self, remote_files: list, local_dir, timeout: float, step: str) -> None:
        self._scp(lambda legacy: [*(self._remote(f, legacy) for f in remote_files), _local(local_dir)],
                  timeout, step)

    def _scp(self, paths, timeout: float, step: str) -> None:
        """scp with `paths(legacy)` (sources then destination), in the protocol the board speaks."""
        if not self.legacy_scp:
            done = process.run(self._scp_argv(paths, False, timeout), timeout, self.name, step)
            if done.returncode == 0:
                self.legacy_scp = False
                return
            if self.legacy_scp is not None or not any(n in done.stderr for n in NO_SFTP) or \
                    self._has_sftp(timeout, step):
                raise self._failure(done, step)
            self.legacy_scp = True
        done = process.run(self._scp_argv(paths, True, timeout), timeout, self.name, step)
        if done.returncode != 0:
            raise self._failure(done, step)

    def _scp_argv(self, paths, legacy: bool, timeout: float) -> list:
        # -T in legacy mode: scp's check of the names the board sends back compares them with the
        # quoted request and would refuse every quoted path (the sha256 check stands in for it)
        protocol = ["-O", "-T"] if legacy else []
        return ["scp", "-q", *self._options(timeout), *protocol, "-P", str(self.port), "--", *paths(legacy)]

    def _has_sftp(self, timeout: float, step: str) -> bool:
        """Whether the board's sshd serves the sftp subsystem; a dropped link raises its failure."""
        cmd = ["ssh", *self._options(timeout), "-s", *self._login(), "sftp"]
        done = process.run(cmd, timeout, self.name, step)  # stdin is empty: sftp-server ends at once
        if done.returncode == 0:
            return True
        if "subsystem request failed" in done.stderr:
            return False
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


def _local(path) -> str:
    """A local path as scp cannot mistake it for `host:path`: scp reads a ':' before the first '/'
    as a host name, so a relative `a:b/c` would go to host `a`; an absolute path starts with '/'."""
    return str(Path(path).absolute())

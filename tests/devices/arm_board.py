"""ARM "board Pythons" on this x86 machine: Debian's ARM python3 with numpy, run by qemu-user.

`arm_python("aarch64")` / `arm_python("armhf")` returns `(path, None)`, the path of a `python`
wrapper script that a devices .yml can name as the board's `python:`, or `(None, reason)` where it
cannot be made (no apt-get or dpkg-deb, no qemu-user-static and no root to install it, no access
to the package registries). The recipe, by hand, is in docs/test_board.md:

- qemu-user-static: Debian's package (`apt-get install` as root where it is missing);
- Debian's `pythonX.Y-minimal`, `libpythonX.Y-minimal`, `libpythonX.Y-stdlib` and the few
  libraries they load, for the ARM architecture, with apt pointed at a package list of its own
  (`APT::Architecture`, `Dir::State::Lists` in a temporary folder: the system's dpkg is not told
  about a foreign architecture), `apt-get download` + `dpkg-deb -x` into a root folder;
- numpy: on aarch64 the manylinux wheel of the host's numpy version from PyPI (`pip download
  --platform`), on armhf Debian's python3-numpy (PyPI has no armv7l numpy wheels) with its BLAS;
- `bin/python`: `PYTHONHOME=<root>/usr qemu-<arch>-static -L <root> <root>/usr/bin/pythonX.Y`.
  `-L` gives the ARM loader and libraries; PYTHONHOME points the interpreter at the root's own
  standard library by its real path (qemu-user's `-L` redirects open() but not every stat(), so
  `/usr/lib/...` paths would mix in this machine's x86 files).

The result is cached under `~/.cache/mace-test-boards/` (XDG_CACHE_HOME), in a folder named by
the recipe: the Debian release, the numpy asked for and RECIPE; a second run costs nothing.
`manifest.json` there records the exact package files and versions. `arm_numba_python()` adds
PyPI's aarch64 numba and llvmlite wheels to the aarch64 board, in a folder of their own (the
board on which the runner compiles the fast kernels' loops). Emulated (`import numpy`
1.3 s against 0.15 s natively): its timings say nothing about a board's speed.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy
from filelock import FileLock

RECIPE = 1   # bump when what goes into a board changes: a new cache folder is made
# Loaded by pythonX.Y and the standard library modules the runner uses (ctypes, hashlib, ssl
# through hashlib, zipfile's zlib/bz2/lzma, uuid), and by numpy's wheel (libstdc++, libgcc_s).
LIBRARIES = ["libc6", "libgcc-s1", "libstdc++6", "zlib1g", "libexpat1", "libffi8", "libbz2-1.0", "liblzma5",
             "libssl3", "libcrypt1", "libuuid1"]
ARCHES = {
    # uname -m: Debian architecture, qemu binary, where numpy comes from
    "aarch64": {"debian": "arm64", "qemu": "qemu-aarch64-static", "numpy": "wheel",
                "platforms": ["manylinux_2_28_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64"]},
    "armv7l": {"debian": "armhf", "qemu": "qemu-arm-static", "numpy": "debian",
               "debs": ["python3-numpy", "libblas3", "liblapack3", "libgfortran5"],
               "triplet": "arm-linux-gnueabihf"},
}
ALIASES = {"arm64": "aarch64", "armhf": "armv7l"}


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mace-test-boards"


def _say(message: str) -> None:
    print(f"[arm board] {message}", file=sys.stderr, flush=True)


def _codename() -> str | None:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return None
    found = re.search(r"^VERSION_CODENAME=\"?([a-z]+)", text, re.M)
    return found.group(1) if found else None


def ensure_qemu(arch: str) -> tuple[str | None, str | None]:
    """(path of qemu-<arch>-static, None), installing Debian's qemu-user-static as root if needed."""
    name = ARCHES[arch]["qemu"]
    found = shutil.which(name) or (f"/usr/bin/{name}" if os.path.isfile(f"/usr/bin/{name}") else None)
    if found:
        return found, None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return None, f"{name} is missing and apt-get as root is not available to install qemu-user-static"
    with FileLock(os.path.join(tempfile.gettempdir(), "mace-test-qemu-install.lock")):
        if not shutil.which(name):
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=120",
                       "qemu-user-static"]
            _say("apt-get install qemu-user-static (the ARM test boards run under qemu-user)")
            done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, timeout=300)
                done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["?"]
                return None, f"installing qemu-user-static failed: {tail[0]}"
    found = shutil.which(name) or (f"/usr/bin/{name}" if os.path.isfile(f"/usr/bin/{name}") else None)
    return (found, None) if found else (None, f"qemu-user-static installed no {name}")


class _Unavailable(Exception):
    pass


def _run(cmd, what: str, timeout: float = 600, cwd=None, ok_codes=(0,)):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    if done.returncode not in ok_codes:
        lines = [ln for ln in (done.stderr + "\n" + done.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith(("E:", "ERROR"))] or lines[-1:] or ["?"]
        raise _Unavailable(f"{what} failed (exit {done.returncode}): {errors[0]}")
    return done


def _apt_options(state: Path, debian_arch: str) -> list:
    """apt pointed at a package list of its own for one foreign architecture (no root needed,
    the system's dpkg and its lists untouched); the sources are the system's."""
    for sub in ("lists/partial", "cache/archives/partial"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    (state / "status").touch()
    return ["-o", f"APT::Architecture={debian_arch}", "-o", f"APT::Architectures::={debian_arch}",
            "-o", f"Dir::State::Lists={state / 'lists'}", "-o", f"Dir::State::status={state / 'status'}",
            "-o", f"Dir::Cache={state / 'cache'}", "-o", "Debug::NoLocking=1", "-o", "Acquire::Languages=none",
            "-o", "Acquire::Retries=2", *(["-o", "APT::Sandbox::User=root"] if os.geteuid() == 0 else [])]


def _python_series(apt: list) -> str:
    """pythonX.Y: what the release's python3-minimal depends on."""
    shown = _run(["apt-cache", *apt, "show", "python3-minimal"], "apt-cache show python3-minimal", timeout=60)
    found = re.search(r"\b(python3\.\d+)-minimal\b", shown.stdout)
    if not found:
        raise _Unavailable("python3-minimal names no python3.X-minimal")
    return found.group(1)


def _make(arch: str, folder: Path, numpy_spec: str) -> dict:
    spec = ARCHES[arch]
    work = folder / "work"
    apt = _apt_options(work / "apt", spec["debian"])
    started = time.monotonic()
    # A mirror mid-sync can fail one index (exit 100) while the others are fine: the downloads
    # below say whether what is needed is there.
    _run(["apt-get", *apt, "update", "-q"], f"apt-get update ({spec['debian']} package lists)", timeout=600,
         ok_codes=(0, 100))
    series = _python_series(apt)
    packages = [f"{series}-minimal", f"lib{series}-minimal", f"lib{series}-stdlib", *LIBRARIES, *spec.get("debs", [])]
    debs = work / "debs"
    debs.mkdir()
    _say(f"apt-get download ({spec['debian']}): {' '.join(packages)}")
    _run(["apt-get", *apt, "download", *packages], f"apt-get download ({spec['debian']})", cwd=debs, timeout=900)
    root = folder / "root"
    for deb in sorted(debs.glob("*.deb")):
        _run(["dpkg-deb", "-x", str(deb), str(root)], f"dpkg-deb -x {deb.name}", timeout=300)
    site = root / "usr" / "lib" / "python3" / "dist-packages"
    site.mkdir(parents=True, exist_ok=True)
    wheels = []
    if spec["numpy"] == "wheel":
        wheel_dir = work / "wheels"
        platforms = [a for p in spec["platforms"] for a in ("--platform", p)]
        pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", *platforms,
               "--python-version", series[len("python"):], "--implementation", "cp", "-d", str(wheel_dir)]
        _say(f"pip download {numpy_spec} ({arch} wheel for {series})")
        _run([*pip, numpy_spec], f"pip download {numpy_spec} for {arch}", timeout=600)
        for wheel in sorted(wheel_dir.glob("*.whl")):
            with zipfile.ZipFile(wheel) as z:
                z.extractall(site)  # file modes are dropped: the .so files need none to load
            wheels.append(wheel.name)
    else:
        # Debian's BLAS/LAPACK are "alternatives": their postinst makes these links
        libdir = root / "usr" / "lib" / spec["triplet"]
        for lib, sub in (("libblas.so.3", "blas"), ("liblapack.so.3", "lapack")):
            if (libdir / sub / lib).exists() and not (libdir / lib).exists():
                (libdir / lib).symlink_to(f"{sub}/{lib}")
    interpreter = root / "usr" / "bin" / series
    if not interpreter.is_file():
        raise _Unavailable(f"{interpreter} is missing after unpacking")
    python = _write_wrapper(folder, "probe", arch, series)
    probe = _run([str(python), "-c", "import json, platform, struct, numpy; print(json.dumps({'machine': "
                  "platform.machine(), 'python': platform.python_version(), 'numpy': numpy.__version__, "
                  "'pointer_bits': 8 * struct.calcsize('P')}))"], f"the {arch} python's first run", timeout=300)
    facts = json.loads(probe.stdout.strip().splitlines()[-1])
    if facts["machine"] != arch:
        raise _Unavailable(f"the {arch} python says it runs on {facts['machine']}")
    manifest = {"arch": arch, "recipe": RECIPE, "debian": _codename(), "series": series, **facts,
                "debs": sorted(p.name for p in debs.glob("*.deb")), "wheels": wheels,
                "made_in_s": round(time.monotonic() - started, 1)}
    shutil.rmtree(work)
    python.unlink()
    return manifest


_QEMU: dict = {}


def _write_wrapper(folder: Path, name: str, arch: str, series: str, root: Path | None = None,
                   site: Path | None = None) -> Path:
    """folder/bin/NAME: the board's python, naming the root (folder/root unless given) and qemu by
    their paths; `site`: a folder of packages besides the root's (the numba board's)."""
    (folder / "bin").mkdir(exist_ok=True)
    tmp = folder / "bin" / f".{name}.tmp"
    extra = "numpy and numba" if site else "numpy"
    path = f"PYTHONPATH='{site}' " if site else ""
    tmp.write_text(
        "#!/bin/sh\n"
        f"# {arch} {series} (Debian) with {extra} under qemu-user: a test board's python (tests/devices/arm_board.py)\n"
        f"R='{root or folder / 'root'}'\n"
        "unset PYTHONPATH PYTHONSTARTUP\n"
        f"{path}PYTHONHOME=\"$R/usr\" PYTHONNOUSERSITE=1 "
        f"exec '{_QEMU[arch]}' -L \"$R\" \"$R/usr/bin/{series}\" \"$@\"\n")
    tmp.chmod(0o755)
    os.replace(tmp, folder / "bin" / name)
    return folder / "bin" / name


def arm_python(arch: str) -> tuple[Path | None, str | None]:
    """(bin/python of the cached ARM board, None) or (None, why it cannot be had here)."""
    arch = ALIASES.get(arch, arch)
    spec = ARCHES[arch]
    for tool in ("apt-get", "apt-cache", "dpkg-deb"):
        if not shutil.which(tool):
            return None, f"{tool} is not available (the {arch} test board is made from Debian packages)"
    codename = _codename()
    if not codename:
        return None, "/etc/os-release names no Debian release"
    qemu, reason = ensure_qemu(arch)
    if reason:
        return None, reason
    _QEMU[arch] = qemu
    numpy_spec = f"numpy=={numpy.__version__}" if spec["numpy"] == "wheel" else "python3-numpy"
    key = hashlib.sha256(json.dumps([RECIPE, arch, codename, numpy_spec, qemu]).encode()).hexdigest()[:12]
    final = cache_root() / f"{arch}-{codename}-{key}"
    python = final / "bin" / "python"
    if python.is_file():
        return python, None
    final.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(final) + ".lock", timeout=1800):
        if python.is_file():
            return python, None
        shutil.rmtree(final, ignore_errors=True)  # left half made by a run that was killed
        for stale in final.parent.glob(f".{arch}-*"):  # the same, before its rename (an hour on)
            with contextlib.suppress(OSError):
                if time.time() - stale.stat().st_mtime > 3600:
                    shutil.rmtree(stale, ignore_errors=True)
        _say(f"making the {arch} test board in {final} (once per machine: 15-26 MB of downloads)")
        folder = Path(tempfile.mkdtemp(prefix=f".{arch}-", dir=final.parent))
        try:
            manifest = _make(arch, folder, numpy_spec)
        except (_Unavailable, subprocess.TimeoutExpired, OSError, ValueError) as e:
            shutil.rmtree(folder, ignore_errors=True)
            return None, f"the {arch} test board could not be made: {e}"
        # the wrapper names its root by path: it is written last, in the final folder
        os.rename(folder, final)
        (final / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        _write_wrapper(final, "python", arch, manifest["series"])
        _say(f"{arch} test board ready in {manifest['made_in_s']} s: Python {manifest['python']}, "
             f"numpy {manifest['numpy']}")
    return python, None


def arm_numba_python() -> tuple[Path | None, str | None]:
    """(bin/python of the aarch64 board with numba, None) or (None, why not).

    The aarch64 board of arm_python with PyPI's aarch64 wheels of this machine's numba and
    llvmlite (manylinux, 62 MB of downloads) in a folder of their own, on its PYTHONPATH: the
    board's root stays the numba-free board's. Cached beside it, keyed by the two versions."""
    base, reason = arm_python("aarch64")
    if reason:
        return None, reason
    try:
        from importlib.metadata import version
        versions = {"numba": version("numba"), "llvmlite": version("llvmlite")}
    except Exception:  # noqa: BLE001 - no numba here: no version to match on the board
        return None, "numba is not installed here (the board gets this machine's numba version)"
    manifest = json.loads((base.parent.parent / "manifest.json").read_text())
    key = hashlib.sha256(json.dumps([RECIPE, str(base), versions]).encode()).hexdigest()[:12]
    final = cache_root() / f"aarch64-numba-{key}"
    python = final / "bin" / "python"
    if python.is_file():
        return python, None
    with FileLock(str(final) + ".lock", timeout=1800):
        if python.is_file():
            return python, None
        shutil.rmtree(final, ignore_errors=True)
        started = time.monotonic()
        folder = Path(tempfile.mkdtemp(prefix=".aarch64-numba-", dir=final.parent))
        try:
            wheels = folder / "wheels"
            platforms = [a for p in ARCHES["aarch64"]["platforms"] for a in ("--platform", p)]
            _say(f"pip download numba=={versions['numba']} llvmlite=={versions['llvmlite']} (aarch64 wheels)")
            _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", *platforms,
                  "--python-version", manifest["series"][len("python"):], "--implementation", "cp",
                  "-d", str(wheels), *(f"{k}=={v}" for k, v in versions.items())],
                 "pip download numba and llvmlite for aarch64", timeout=900)
            for wheel in sorted(wheels.glob("*.whl")):
                with zipfile.ZipFile(wheel) as z:
                    z.extractall(folder / "site")
            names = sorted(w.name for w in wheels.glob("*.whl"))
            shutil.rmtree(wheels)
            # the wrappers name the site folder by its final path: probed after the rename
            os.rename(folder, final)
            probe = _write_wrapper(final, "probe", "aarch64", manifest["series"], base.parent.parent / "root",
                                   final / "site")
            done = _run([str(probe), "-c", "import numba; print(numba.__version__)"],
                        "the aarch64 board's `import numba`", timeout=600)
            if done.stdout.strip().splitlines()[-1:] != [versions["numba"]]:
                raise _Unavailable(f"the aarch64 board's numba says {done.stdout.strip()!r}")
            probe.unlink()
        except (_Unavailable, subprocess.TimeoutExpired, OSError, ValueError) as e:
            shutil.rmtree(folder, ignore_errors=True)
            shutil.rmtree(final, ignore_errors=True)
            return None, f"the aarch64 board with numba could not be made: {e}"
        (final / "manifest.json").write_text(json.dumps(
            dict(manifest, **versions, wheels=manifest["wheels"] + names,
                 made_in_s=round(time.monotonic() - started, 1)), indent=1) + "\n")
        _write_wrapper(final, "python", "aarch64", manifest["series"], base.parent.parent / "root", final / "site")
        _say(f"aarch64 test board with numba {versions['numba']} ready in {final}")
    return python, None

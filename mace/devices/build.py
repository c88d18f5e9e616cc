"""What `build` lays out under builds/<library_name>/ beside the converted models for a device.

    builds/<library_name>/
    ├── model/<model>.pb, .data, .pb_txt       the converted models (what `convert` writes)
    ├── lib/<abi>/<runtime>/mace_run.pyz       the runner, per target ABI and runtime (cpu, cpu_gpu)
    ├── opencl/<abi>/*.bin                     OpenCL binaries / tuned parameters, when present
    └── build.json                             what is where, with sizes and sha256

This is MACE's tree (model/, opencl/<abi>/, libraries per ABI and runtime) where it applies.
The runner is pure Python, so every ABI gets the same bytes; the folders say which targets the
library was built for, and `run` on a device takes the runner of the device's ABI.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from mace import __version__
from mace.config.deployment import DeploymentConfig
from mace.config.files import library_dir, model_paths
from mace.config.hints import command_hint
from mace.devices import runner_zip
from mace.errors import ConfigError
from mace.ir.manifest import MANIFEST_LIMIT
from mace.util.atomic import atomic_write_text
from mace.util.regular_file import read_limited

RUNNER = "mace_run.pyz"
BUILD_FILE = "build.json"


@dataclass
class BuildResult:
    library_dir: Path
    converted: list                                  # mace.convert.ConvertResult per model
    runners: dict = field(default_factory=dict)      # abi -> path of mace_run.pyz
    opencl: list = field(default_factory=list)       # paths of OpenCL files shipped
    manifest: Path | None = None                     # build.json
    warnings: list = field(default_factory=list)


def runtime_dir(runtimes) -> str:
    """MACE's library folder names: cpu, cpu_gpu, cpu_gpu_dsp."""
    runtimes = set(runtimes)
    if runtimes & {"dsp", "hta", "apu", "htp"}:
        return "cpu_gpu_dsp"
    if runtimes & {"gpu", "cpu+gpu"}:
        return "cpu_gpu"
    return "cpu"


def file_entry(path: Path) -> dict:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return {"bytes": path.stat().st_size, "sha256": h.hexdigest()}


def package_library(config: DeploymentConfig, converted: list, build_dir=None) -> BuildResult:
    """Lay out the runner per ABI and the manifest beside the converted models (mace/build.py)."""
    lib = library_dir(config, build_dir)
    members = runner_zip.archive_members()
    result = BuildResult(lib, converted, warnings=[f"the runner cannot ship: {w} (import it inside a "
                                                   f"function, or the device needs it too)"
                                                   for w in runner_zip.foreign_imports(members)])
    runtime = runtime_dir(sg.runtime for m in config.models.values() for sg in m.subgraphs)
    manifest = {"library": config.library_name, "version": __version__,
                "protobuf": f"{runner_zip.protobuf_version()} (pure Python, inside {RUNNER})",
                "abis": {}, "models": {}, "opencl": {}}
    for abi in config.target_abis:
        path = lib / "lib" / abi / runtime / RUNNER
        runner_zip.write_runner(path, members)
        result.runners[abi] = path
        manifest["abis"][abi] = {"runtime": runtime, "runner": path.relative_to(lib).as_posix(),
                                 **file_entry(path)}
        shipped = sorted(p for p in (lib / "opencl" / abi).glob("*") if p.is_file())
        result.opencl += shipped
        manifest["opencl"][abi] = {p.relative_to(lib).as_posix(): file_entry(p) for p in shipped}
    for name, model in config.models.items():
        files = [p for p in model_paths(config, name, build_dir) if p.exists()]
        if files:
            manifest["models"][name] = {"runtime": model.graph.runtime,
                                        "files": {p.relative_to(lib).as_posix(): file_entry(p) for p in files}}
    result.manifest = lib / BUILD_FILE
    _write_json(result.manifest, manifest)
    return result


def _write_json(path: Path, data: dict) -> None:
    atomic_write_text(path, json.dumps(data, indent=2))


@dataclass
class BuiltFor:
    """What `run` on a device of one ABI pushes: the runner and the OpenCL files."""
    runner: Path
    opencl: list


def built_for(config: DeploymentConfig, abi: str, build_dir=None) -> BuiltFor:
    lib = library_dir(config, build_dir)
    again = f"run `{command_hint('build', config, build_dir)}`"
    try:   # a regular file of bounded size: a FIFO or a link to /dev/zero never blocks
        manifest = json.loads(read_limited(lib / BUILD_FILE, MANIFEST_LIMIT))
    except FileNotFoundError:
        raise ConfigError(f"{lib / BUILD_FILE} is missing: running on a device needs a build: {again} "
                          f"first") from None
    except (OSError, ValueError, RecursionError) as e:
        why = getattr(e, "strerror", None) or e
        raise ConfigError(f"{lib / BUILD_FILE}: unreadable ({why}): {again}") from None
    abis = manifest.get("abis") if isinstance(manifest, dict) else None
    shipped = manifest.get("opencl") or {} if isinstance(manifest, dict) else None
    opencl = shipped.get(abi, {}) if isinstance(shipped, dict) else None
    entry = abis.get(abi) if isinstance(abis, dict) else None
    if not (isinstance(entry, dict) and isinstance(entry.get("runner"), str) and isinstance(opencl, dict)
            and all(isinstance(p, str) for p in opencl)):
        if isinstance(abis, dict) and entry is None:
            raise ConfigError(f"{lib} has no runner for ABI {abi} (built for [{', '.join(map(str, abis))}]): "
                              f"{again}")
        raise ConfigError(f"{lib / BUILD_FILE}: not a build description of this version: {again}")
    if not (lib / entry["runner"]).is_file():
        raise ConfigError(f"{lib} has no runner for ABI {abi} (built for [{', '.join(map(str, abis))}]): {again}")
    return BuiltFor(lib / entry["runner"], [lib / p for p in opencl])

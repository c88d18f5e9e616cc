"""`build` and the runner it packs: the builds/ tree, build.json, and mace_run.pyz on a Python
that has numpy and nothing else."""
from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from mace.devices import runner, runner_zip
from mace.devices.build import file_entry
from mace.config.files import safe_name
from mace.runtime.engine import create_engine
from tests.cli_helpers import ROOT, cli
from tests.devices.helpers import board_work, build, fails, no_adb_env, write_devices


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """digits built for host and arm64, with an OpenCL file waiting in opencl/arm64/."""
    work = board_work(tmp_path_factory.mktemp("build"), abis=("host", "arm64"))
    opencl = work / "out" / "digits" / "opencl" / "arm64"
    opencl.mkdir(parents=True)
    (opencl / "digits_compiled_opencl_kernel.Board.rk3399.bin").write_bytes(b"\0" * 16)
    build(work)
    return work


def test_build_lays_out_models_runners_and_manifest(built):
    lib = built / "out" / "digits"
    names = sorted(p.relative_to(lib).as_posix() for p in lib.rglob("*") if p.is_file())
    assert [n for n in names if not n.startswith("model/")] == [  # model/ is convert's
        "build.json", "lib/arm64/cpu/mace_run.pyz", "lib/host/cpu/mace_run.pyz",
        "opencl/arm64/digits_compiled_opencl_kernel.Board.rk3399.bin"]
    assert {"model/digits_cnn.data", "model/digits_cnn.pb"} <= set(names)
    manifest = json.loads((lib / "build.json").read_text())
    assert manifest["abis"]["arm64"]["runner"] == "lib/arm64/cpu/mace_run.pyz"
    for abi in ("host", "arm64"):
        entry = manifest["abis"][abi]
        assert file_entry(lib / entry["runner"]) == {"bytes": entry["bytes"], "sha256": entry["sha256"]}
    # pure Python: every ABI gets the same runner
    assert (lib / "lib/host/cpu/mace_run.pyz").read_bytes() == (lib / "lib/arm64/cpu/mace_run.pyz").read_bytes()
    assert list(manifest["opencl"]["arm64"]) == ["opencl/arm64/digits_compiled_opencl_kernel.Board.rk3399.bin"]
    assert set(manifest["models"]["digits_cnn"]["files"]) == {"model/digits_cnn.pb", "model/digits_cnn.data"}


def test_the_runner_archive_is_reproducible(tmp_path):
    members = runner_zip.archive_members()  # once: other work may edit the sources meanwhile
    first = runner_zip.write_runner(tmp_path / "a" / "mace_run.pyz", members)
    assert runner_zip.write_runner(tmp_path / "b" / "mace_run.pyz", members) == first
    assert (tmp_path / "a" / "mace_run.pyz").read_bytes() == (tmp_path / "b" / "mace_run.pyz").read_bytes()


def test_the_runner_archive_is_the_size_the_docs_say(tmp_path):
    """docs/devices.md and runner_zip's docstring give the archive's size and protobuf's share of
    it: within a quarter of what is built today (update both when this fails)."""
    path = tmp_path / "mace_run.pyz"
    runner_zip.write_runner(path)
    with zipfile.ZipFile(path) as z:
        protobuf = sum(i.compress_size for i in z.infolist() if i.filename.startswith("google/"))
    measured = {"protobuf": protobuf / 1024, "archive": path.stat().st_size / 1024}
    pattern = re.compile(r"~(\d+) KiB of the ~(\d+) KiB archive")
    for doc in (ROOT / "docs" / "devices.md", ROOT / "mace" / "devices" / "runner_zip.py"):
        stated = pattern.search(" ".join(doc.read_text().split()))
        assert stated, f"{doc}: no '~N KiB of the ~M KiB archive'"
        for (what, size), said in zip(measured.items(), map(int, stated.groups())):
            assert abs(said - size) <= size / 4, f"{doc} says ~{said} KiB for the {what}; it is {size:.0f} KiB"


def test_the_runner_holds_no_compiled_code_and_nothing_the_device_lacks():
    members = runner_zip.archive_members()
    assert runner_zip.foreign_imports(members) == []
    assert not [n for n in members if n.endswith((".so", ".pyd", ".pyc"))]
    assert "google/protobuf/LICENSE" in members and "mace/runtime/engine.py" in members
    assert not [n for n in members if n.startswith(("mace/config/", "mace/frontends/", "mace/cli/"))]
    # the numba loops travel apart, where no import finds them (the runner unpacks them where numba is)
    loops = sorted(n for n in members if n.endswith("loops.py"))
    assert loops and all(n.startswith(f"{runner.LOOPS}/mace/ops/fast/") for n in loops), loops
    assert {f"{runner.LOOPS}/mace/ops/fast/_loops.py", f"{runner.LOOPS}/mace/ops/fast/int8/_qloops.py"} <= set(loops)


def test_the_runner_needs_only_numpy(built, numpy_only_python, tmp_path):
    for missing in ("google.protobuf", "yaml", "onnx", "filelock"):
        r = subprocess.run([numpy_only_python, "-c", f"import {missing}"], capture_output=True)
        assert r.returncode != 0, f"the numpy-only Python has {missing}"
    image = np.load(built / "digits" / "inputs" / "image_0.npy").astype(np.float32).reshape(1, 8, 8, 1)
    np.save(tmp_path / "image.npy", image)
    model = built / "out" / "digits" / "model" / "digits_cnn.pb"
    r = subprocess.run([numpy_only_python, built / "out/digits/lib/arm64/cpu/mace_run.pyz", "--model", model,
                        "--input", f"image={tmp_path / 'image.npy'}", "--output_dir", tmp_path / "out",
                        "--round", "3"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout.splitlines()[-1])
    assert result == json.loads((tmp_path / "out" / runner.RESULT_FILE).read_text())
    timing = result["timing"]
    assert timing["rounds"] == 3 and len(timing["round_ms"]) == 3 and timing["init_ms"] > 0
    assert min(timing["round_ms"]) == timing["min_ms"]
    assert result["environment"]["protobuf"] == "python" and result["environment"]["numpy"] == np.__version__
    assert result["outputs"][0]["file"] == "prob.npy"
    expected = create_engine(model).run({"image": image})["prob"]
    # the runner has no numba loops (numpy fast path), this process may: same math, other rounding
    np.testing.assert_allclose(np.load(tmp_path / "out" / "prob.npy"), expected, rtol=1e-5, atol=1e-9)


def test_the_runner_unpacks_its_numba_loops_where_numba_is(built, tmp_path):
    # this machine's Python has numba: the runner unpacks its loops into the cache folder and the
    # fast kernels run compiled; with MACE_NO_JIT=1 (or without numba: the numpy-only Python
    # above) they take their numpy paths, and the result says why
    pytest.importorskip("numba", reason="the loops compile only where numba is")
    image = np.load(built / "digits" / "inputs" / "image_0.npy").astype(np.float32).reshape(1, 8, 8, 1)
    np.save(tmp_path / "image.npy", image)
    model = built / "out" / "digits" / "model" / "digits_cnn.pb"
    env = {k: v for k, v in os.environ.items() if k != "MACE_NO_JIT"}
    results = {}
    for name, extra in (("jit", {}), ("no_jit", {"MACE_NO_JIT": "1"})):
        r = subprocess.run([sys.executable, built / "out/digits/lib/host/cpu/mace_run.pyz", "--model", model,
                            "--input", f"image={tmp_path / 'image.npy'}", "--output_dir", tmp_path / name],
                           capture_output=True, text=True, timeout=300,
                           env=dict(env, XDG_CACHE_HOME=str(tmp_path / "cache"), **extra))
        assert r.returncode == 0, r.stderr
        results[name] = json.loads(r.stdout.splitlines()[-1])["engine"]
    jit, no_jit = results["jit"], results["no_jit"]
    folder = Path(jit["loops"]["folder"])
    assert folder.parent == tmp_path / "cache" / "mace_run" and folder.name.startswith(f"loops-{platform.machine()}-py")
    assert (folder / "mace/ops/fast/_loops.py").read_bytes() == (ROOT / "mace/ops/fast/_loops.py").read_bytes()
    # compiled, the softmax too is a fast kernel (its numpy path declines: the reference runs)
    assert jit["compiled"] and jit["kernels"] == {"cpu:fast": 5} and jit["jit_target"], jit
    assert any((folder / "mace/ops/fast/__pycache__").glob("*.nbi"))   # numba's cache, beside them
    assert no_jit["loops"] == {"skipped": "MACE_NO_JIT is set"} and not no_jit["compiled"], no_jit
    assert no_jit["kernels"] == {"cpu:fast": 4, "cpu": 1}, no_jit
    expected = create_engine(model).run({"image": image})["prob"]
    for name in results:
        np.testing.assert_allclose(np.load(tmp_path / name / "prob.npy"), expected, rtol=1e-5, atol=1e-7)


def test_the_runner_stops_itself_at_its_timeout(built, numpy_only_python, tmp_path):
    image = np.zeros((1, 8, 8, 1), np.float32)
    np.save(tmp_path / "image.npy", image)
    start = time.monotonic()
    r = subprocess.run([numpy_only_python, built / "out/digits/lib/host/cpu/mace_run.pyz",
                        "--model", built / "out/digits/model/digits_cnn.pb", "--input",
                        f"image={tmp_path / 'image.npy'}", "--round", "1000000000", "--timeout", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == runner.TIMEOUT_EXIT and "error: timed out after 1 s" in r.stderr
    assert time.monotonic() - start < 20


def test_the_runner_names_a_bad_input(built, numpy_only_python, tmp_path):
    r = subprocess.run([numpy_only_python, built / "out/digits/lib/host/cpu/mace_run.pyz",
                        "--model", built / "out/digits/model/digits_cnn.pb", "--input", "image=missing.npy"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stderr.startswith("error: --input image: cannot read missing.npy")
    assert "Traceback" not in r.stderr


def test_the_runner_without_numpy_says_how_to_get_it(built, bare_python, tmp_path):
    r = subprocess.run([bare_python, built / "out/digits/lib/host/cpu/mace_run.pyz",
                        "--model", built / "out/digits/model/digits_cnn.pb", "--input", "image=x.npy"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "mace_run.pyz needs numpy on this device" in r.stderr and "-m pip install numpy" in r.stderr
    assert "internal" not in r.stderr and "Traceback" not in r.stderr


def test_the_runner_names_files_as_run_does():
    for name in ("prob", "scope/out:0", "a\\b"):
        assert runner.safe_name(name) == safe_name(name)


def test_running_on_a_board_needs_a_build(tmp_path):
    work = board_work(tmp_path, abis=("arm64",))   # an arm64 board, never reached
    assert cli("convert", "--config=deploy.yml", "--build_dir=out", cwd=work).returncode == 0
    write_devices(work / "devices.yml", board={"target_abis": "arm64", "address": "10.0.0.1", "username": "u"})
    r = cli("run", "--config=deploy.yml", "--build_dir=out", cwd=work, env=no_adb_env())
    fails(r, "build.json is missing", "tools/converter.py build --config=deploy.yml --build_dir=out`")


def test_a_build_json_that_is_a_fifo_or_of_the_wrong_shape_is_refused(tmp_path):
    """Issue 38: build.json was read with a blocking open (a FIFO there waited forever) and its
    shape trusted (internal errors); each is now one clear error before any connection."""
    import os
    work = board_work(tmp_path, abis=("arm64",))   # an arm64 board, never reached
    assert cli("convert", "--config=deploy.yml", "--build_dir=out", cwd=work).returncode == 0
    write_devices(work / "devices.yml", board={"target_abis": "arm64", "address": "10.0.0.1", "username": "u"})
    build_json = work / "out" / "digits" / "build.json"
    os.mkfifo(build_json)
    r = cli("run", "--config=deploy.yml", "--build_dir=out", cwd=work, env=no_adb_env(), timeout=60)
    fails(r, "build.json: unreadable (not a regular file: a FIFO)", "converter.py build --config=deploy.yml")
    for bad in ([], {"abis": []}, {"abis": {"arm64": "lib/x"}}, {"abis": {"arm64": {"runner": 1}}},
                {"abis": {"arm64": {"runner": "r"}}, "opencl": {"arm64": ["x"]}}):
        build_json.unlink()
        build_json.write_text(json.dumps(bad))
        r = cli("run", "--config=deploy.yml", "--build_dir=out", cwd=work, env=no_adb_env(), timeout=60)
        fails(r, "build.json: not a build description of this version")


def test_runner_archive_is_a_zipapp_with_a_shebang(built):
    path = built / "out/digits/lib/host/cpu/mace_run.pyz"
    assert path.read_bytes().startswith(b"#!/usr/bin/env python3\n") and path.stat().st_mode & 0o111
    with zipfile.ZipFile(path) as z:
        assert "__main__.py" in z.namelist()
        assert 'PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"' in z.read("__main__.py").decode()

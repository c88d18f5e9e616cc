"""Builds are used whole or refused: torn builds (a convert killed between two file writes),
files changed after convert, builds older than the manifest, and stale builds (the model or
the deployment file changed since convert). docs/reliability.md, "Builds and loading"."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from tests.cli_helpers import ROOT, cli, digits_model, sha256, workdir, write_deployment

RERUN = "tools/converter.py convert --config=deploy.yml --build_dir=out`"  # in "re-run `...`"

# Runs the CLI with os.replace / os.unlink counted; the KILL_AT-th call never happens: the
# process dies at once (os._exit, as a SIGKILL would: no cleanup, no finally blocks).
KILLER = """
import os, sys
sys.path.insert(0, {root!r})
kill_at, count = int(os.environ["KILL_AT"]), [0]
def counted(real):
    def call(*args, **kwargs):
        count[0] += 1
        if count[0] == kill_at:
            os._exit(137)
        return real(*args, **kwargs)
    return call
os.replace, os.unlink = counted(os.replace), counted(os.unlink)
from mace.cli.main import main
rc = main(sys.argv[1:])
sys.stderr.write(f"WRITES {{count[0]}}\\n")
sys.exit(rc)
"""


def ok(r):
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


def refused(r, *fragments):
    assert r.returncode == 1, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    assert len([x for x in r.stderr.splitlines() if x.startswith("error:")]) == 1, r.stderr
    for fragment in fragments:
        assert fragment in r.stderr, f"{fragment!r} not in:\n{r.stderr}"
    return r.stderr


@pytest.fixture
def built(tmp_path):
    work = workdir(tmp_path)
    ok(cli("convert", "--config=deploy.yml", "--build_dir=out", cwd=work))
    return work


def output_of(work, name="o"):
    ok(cli("run", "--config=deploy.yml", "--build_dir=out", f"--output_dir={name}", cwd=work))
    return np.load(work / name / "prob.npy")


def other_weights(work):
    """digits_cnn.onnx with its Gemm weights reversed; deploy.yml names it (new checksum)."""
    path = work / "digits" / "digits_cnn.onnx"
    model = onnx.load(str(path))
    for init in model.graph.initializer:
        arr = numpy_helper.to_array(init)
        if arr.ndim == 2:
            init.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(arr[::-1]), init.name))
    onnx.save(model, str(path))
    write_deployment(work / "deploy.yml", {"digits_cnn": digits_model(model_sha256_checksum=sha256(path))})


def kill_convert_at(work, n: int):
    env = {**__import__("os").environ, "KILL_AT": str(n)}
    return subprocess.run([sys.executable, "-c", KILLER.format(root=str(ROOT)), "convert",
                           "--config=deploy.yml", "--build_dir=out"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=120)


def test_convert_killed_between_any_two_writes_never_leaves_a_usable_mix(built):
    """Build A exists; the model changes to B; convert B is killed before each of its file
    writes (renames, removals) in turn. `run` then either runs a complete build of B or
    refuses with an error saying to re-run convert: never A's weights with B's graph."""
    out_a = output_of(built, "a")
    pristine = built / "out_a"
    shutil.copytree(built / "out", pristine)
    other_weights(built)
    total = kill_convert_at(built, 0)   # never killed: counts the writes, makes build B
    assert total.returncode == 0, total.stderr
    writes = int(total.stderr.rsplit("WRITES ", 1)[1])
    out_b = output_of(built, "b")
    assert not np.allclose(out_a, out_b)   # the two builds are told apart by their outputs
    outcomes = []
    for n in range(1, writes + 1):
        shutil.rmtree(built / "out")
        shutil.copytree(pristine, built / "out")
        killed = kill_convert_at(built, n)
        assert killed.returncode == 137, (n, killed.stderr)
        r = cli("run", "--config=deploy.yml", "--build_dir=out", "--output_dir=k", cwd=built)
        if r.returncode == 0:
            np.testing.assert_array_equal(np.load(built / "k" / "prob.npy"), out_b)
            outcomes.append("B")
        else:
            err = refused(r, RERUN)
            outcomes.append("torn" if "torn" in err else "stale")
    # early kills leave build A, stale for B; kills mid-swap are torn; the last ones leave B whole
    assert outcomes[0] == "stale" and "torn" in outcomes and outcomes[-1] == "B", outcomes


def test_data_file_changed_after_convert_is_refused(built):
    data = built / "out" / "digits" / "model" / "digits_cnn.data"
    raw = bytearray(data.read_bytes())
    raw[100] ^= 0x10   # one bit, size unchanged
    data.write_bytes(bytes(raw))
    refused(cli("run", "--config=deploy.yml", "--build_dir=out", cwd=built),
            "digits_cnn.data: contents differ from the build manifest", RERUN)


def test_graph_and_data_of_two_builds_are_refused(built, tmp_path):
    (tmp_path / "b").mkdir()
    other = workdir(tmp_path / "b")
    other_weights(other)
    ok(cli("convert", "--config=deploy.yml", "--build_dir=out", cwd=other))
    model_dir = built / "out" / "digits" / "model"
    shutil.copy(other / "out" / "digits" / "model" / "digits_cnn.pb", model_dir / "digits_cnn.pb")
    refused(cli("run", "--config=deploy.yml", "--build_dir=out", "--validate", cwd=built),
            "digits_cnn.pb: contents differ from the build manifest", "torn", RERUN)


def test_build_without_manifest_is_refused(built):
    (built / "out" / "digits" / "model" / "digits_cnn.manifest.json").unlink()
    refused(cli("run", "--config=deploy.yml", "--build_dir=out", cwd=built),
            "digits_cnn.manifest.json is missing", RERUN)


def test_copied_build_is_hashed_once_and_still_runs(built):
    """The stat cache only saves time: a copied build (new inodes) is hashed and accepted."""
    shutil.copytree(built / "out", built / "copy")
    cache = built / "copy" / "digits" / "model" / "digits_cnn.stat_cache.json"
    cache.unlink()
    ok(cli("run", "--config=deploy.yml", "--build_dir=copy", cwd=built))
    assert any(k.startswith("source:") for k in json.loads(cache.read_text()))   # refreshed


@pytest.mark.parametrize("change, key, fragment", [
    ({"output_shapes": "1,12"}, "output_shapes", "built with [[1, 10]], now [[1, 12]]"),
    ({"output_tensors": "logits"}, "output_tensors", "built with ['prob'], now ['logits']"),
    ({"quantize": 1}, "quantize", "built with 0, now 1"),
    ({"input_shapes": "1,8,8,2"}, "input_shapes", "built with [[1, 8, 8, 1]], now [[1, 8, 8, 2]]"),
    ({"input_data_formats": "NCHW"}, "input_data_formats", "built with ['NHWC'], now ['NCHW']"),
])
def test_deployment_changed_after_convert_is_stale(built, change, key, fragment):
    """No `internal error: KeyError` from run --validate: the changed key, both values, and
    what to do."""
    write_deployment(built / "deploy.yml", {"digits_cnn": digits_model(**change)})
    err = refused(cli("run", "--config=deploy.yml", "--build_dir=out", "--validate", cwd=built),
                  "is stale", f"models.digits_cnn.subgraphs[0].{key}: {fragment}", RERUN)
    assert err.count("built with") == 1, err   # only what changed is listed


def test_model_file_changed_after_convert_is_stale(built):
    other_weights(built)
    refused(cli("run", "--config=deploy.yml", "--build_dir=out", cwd=built),
            "models.digits_cnn.model_file_path: digits/digits_cnn.onnx changed since convert", RERUN)
    ok(cli("convert", "--config=deploy.yml", "--build_dir=out", cwd=built))
    ok(cli("run", "--config=deploy.yml", "--build_dir=out", "--validate", cwd=built))


def test_keys_that_do_not_change_the_build_are_not_stale(built):
    write_deployment(built / "deploy.yml", {"digits_cnn": digits_model(
        validation_inputs_data=None, validation_threshold={"CPU": 0.99})})
    ok(cli("run", "--config=deploy.yml", "--build_dir=out", "--validate", cwd=built))


def test_a_manifest_that_does_not_describe_the_build_is_stale(built):
    """Issue 38: an edited manifest of the wrong shape was an internal error, and `files: {}` turned
    every check off; now each is refused naming what is wrong with it."""
    manifest = built / "out" / "digits" / "model" / "digits_cnn.manifest.json"
    doc = json.loads(manifest.read_text())
    pb = next(k for k, e in doc["files"].items() if e["role"] == "graph")
    cases = [({**doc, "files": {}}, "files: no graph file listed"),
             ({**doc, "files": "digits_cnn.pb"}, "files: not a mapping"),
             ({**doc, "files": {**doc["files"], pb: "graph"}}, f"files.{pb}: not a role, sha256 and size"),
             ({**doc, "files": {k: {**e, "size": "1"} for k, e in doc["files"].items()}}, "not a role, sha256"),
             ({**doc, "made_from": "x"}, "made_from: not a mapping"),
             ({**doc, "made_from": {**doc["made_from"], "model_file": "m.onnx"}}, "made_from.model_file"),
             ({**doc, "made_from": {**doc["made_from"], "model_file": {"path": "m", "sha256": 7}}},
              "made_from.model_file"),
             ({**doc, "made_from": {**doc["made_from"], "subgraphs": {"x": []}}}, "made_from.subgraphs")]
    for bad, fragment in cases:
        manifest.write_text(json.dumps(bad))
        refused(cli("run", "--config=deploy.yml", "--build_dir=out", cwd=built),
                "the build manifest does not describe a build", fragment, RERUN)
    manifest.write_text("[" * 100_000 + "]" * 100_000)
    refused(cli("run", "--config=deploy.yml", "--build_dir=out", cwd=built),
            "unreadable build manifest (nested too deeply)", RERUN)
    manifest.write_text(json.dumps(doc))
    ok(cli("run", "--config=deploy.yml", "--build_dir=out", cwd=built))


def test_fifos_and_dev_zero_in_a_build_never_block(built):
    """Issue 38: a FIFO or a link to /dev/zero where the build manifest, its stat cache or a file
    it lists belongs was opened blocking (a FIFO waits for a writer forever)."""
    import os
    model_dir = built / "out" / "digits" / "model"
    cache = model_dir / "digits_cnn.stat_cache.json"
    cache.unlink()
    os.mkfifo(cache)   # only saves time: ignored, and the run goes on
    ok(cli("run", "--config=deploy.yml", "--build_dir=out", cwd=built, timeout=60))
    manifest = model_dir / "digits_cnn.manifest.json"
    text = manifest.read_text()
    manifest.unlink()
    manifest.symlink_to("/dev/zero")
    refused(cli("run", "--config=deploy.yml", "--build_dir=out", cwd=built, timeout=60),
            "unreadable build manifest (not a regular file: a character device)", RERUN)
    doc = json.loads(text)
    pb = next(k for k, e in doc["files"].items() if e["role"] == "graph")
    doc["files"][pb]["size"] = 0   # a FIFO's size: the size check alone would let it through
    manifest.unlink()
    manifest.write_text(json.dumps(doc))
    (built / "out" / "digits" / pb).unlink()
    os.mkfifo(built / "out" / "digits" / pb)
    refused(cli("run", "--config=deploy.yml", "--build_dir=out", cwd=built, timeout=60),
            "digits_cnn.pb: cannot be read (not a regular file: a FIFO)", RERUN)


def test_a_killed_converts_scratch_folder_is_removed_by_the_next_convert(built):
    """Issue 38: a SIGKILLed convert left builds/<lib>/.convert.* behind for ever; the next convert
    removes those of dead processes and leaves a running convert's (this process's pid) alone."""
    import os
    library = built / "out" / "digits"
    other_weights(built)
    assert kill_convert_at(built, 1).returncode == 137   # killed before its first rename
    left = list(library.glob(".convert.*"))
    assert left and all(p.is_dir() for p in left)
    running = library / f".convert.{os.getpid()}.live"
    running.mkdir()
    ok(cli("convert", "--config=deploy.yml", "--build_dir=out", cwd=built))
    assert sorted(library.glob(".convert.*")) == [running]

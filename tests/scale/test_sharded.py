"""Sharded sample loops (mace/scale): MACE's accuracy script and --quantize_stat give the same
result in process and on Ray (2 workers, embedded), a worker killed mid-run changes nothing, a
failed run resumes from its finished shards. The reference for top-1 is onnxruntime on the
same samples (scikit-learn's digits test set)."""
from __future__ import annotations

import numpy as np
import pytest

from mace.config import load_deployment
from mace.convert import convert_deployment
from mace.errors import MaceError
from mace.quantize.calibrate import collect_stats, load_samples
from mace.quantize.stat import log_lines, stat_config, stat_engine
from mace.scale import accuracy, variants
from mace.scale import stat as sharded_stat
from mace.scale.runner import FAIL_HOOK, Cluster, make_cluster, session
from mace.util.invocation import install_hint
from tests.cli_helpers import DIGITS, digits_model, workdir, write_deployment

LOCAL = Cluster("local")
RAY = Cluster("ray", None, 2)


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """(config, build dir, script) of the digits model with its accuracy script, converted."""
    work = workdir(tmp_path_factory.mktemp("scale"))
    write_deployment(work / "acc.yml", {"digits_cnn": digits_model(
        accuracy_validation_script="digits/accuracy_validator.py", quantize_calibration_data="digits/inputs")})
    config = load_deployment(work / "acc.yml")
    convert_deployment(config, work / "builds")
    return config, work / "builds", work / "digits" / "accuracy_validator.py"


@pytest.fixture(scope="module")
def ray_up():
    pytest.importorskip("ray", reason="Ray is the optional extra [ray]")
    with session(RAY):
        yield RAY


def _top1(config, build_dir, script, cluster, variant, **kw):
    model = config.models["digits_cnn"]
    v = variants.prepare(config, model, variant, build_dir)
    return accuracy.evaluate(v.config, v.config.models["digits_cnn"], v.build_dir, script, "test", cluster,
                             variant, **kw)


def test_ray_gives_the_in_process_accuracy_for_float_and_quantized(digits, ray_up):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference")
    config, build_dir, script = digits
    with np.load(DIGITS / "test_set.npz") as z:
        images, labels = z["images"], z["labels"]
    sess = ort.InferenceSession(str(DIGITS / "digits_cnn.onnx"), providers=["CPUExecutionProvider"])
    pred = np.array([sess.run(["prob"], {"image": img[None]})[0].argmax() for img in images])
    for variant in ("cpu", "quantized"):
        here = _top1(config, build_dir, script, LOCAL, variant)
        there = _top1(config, build_dir, script, ray_up, variant)
        assert there.shards > 2 and there.resumed == 0
        assert there.result.result == here.result.result, variant
        assert there.result.printed == here.result.printed
        if variant == "cpu":
            assert here.result.result["correct"] == int((pred == labels).sum())
        assert 0.9 < here.result.result["top1"] < 1.0   # int8 of a trained model: close, and can fail
    assert not there.directory.exists()                   # finished: no shards left behind


def test_a_worker_killed_mid_run_changes_nothing(digits, ray_up, monkeypatch):
    config, build_dir, script = digits
    expected = _top1(config, build_dir, script, LOCAL, "cpu").result.result
    notes = []
    monkeypatch.setenv(FAIL_HOOK, "2:exit")   # the worker running shard 2 calls os._exit once
    run = _top1(config, build_dir, script, ray_up, "cpu", notify=notes.append)
    assert run.result.result == expected and run.result.samples == 450
    assert any("died running shard 2" in n for n in notes), notes


def test_a_failed_run_resumes_from_its_finished_shards(digits, monkeypatch):
    config, build_dir, script = digits
    expected = _top1(config, build_dir, script, LOCAL, "cpu").result.result
    monkeypatch.setenv(FAIL_HOOK, "3:raise")
    with pytest.raises(MaceError, match="shard 3"):
        _top1(config, build_dir, script, LOCAL, "cpu")
    store = build_dir / "digits" / "accuracy" / "digits_cnn" / "cpu"   # builds/<library>/accuracy/<model>/<variant>
    assert sorted(p.name for p in store.glob("shard_*.npz")) == [f"shard_0000{i}.npz" for i in range(3)]
    monkeypatch.delenv(FAIL_HOOK)
    seen = []
    run = _top1(config, build_dir, script, LOCAL, "cpu", progress=lambda n, total: seen.append(n))
    assert run.resumed == 3 and run.result.result == expected
    assert seen[0] == 3 * 113 and seen[-1] == 450   # 4 shards of 113 batches: the bar starts past 3


def test_damaged_or_planted_shards_are_run_again_not_resumed(digits, monkeypatch):
    """Issue 38: resumed shards were read unchecked. Zeroed outputs (a valid .npz), a truncated
    shard, a link to /dev/zero, a directory and a stray index are each run again or removed, and
    the result is the uninterrupted run's."""
    import os
    config, build_dir, script = digits
    expected = _top1(config, build_dir, script, LOCAL, "cpu").result.result
    monkeypatch.setenv(FAIL_HOOK, "3:raise")
    with pytest.raises(MaceError, match="shard 3"):
        _top1(config, build_dir, script, LOCAL, "cpu")
    monkeypatch.delenv(FAIL_HOOK)
    store = build_dir / "digits" / "accuracy" / "digits_cnn" / "cpu"
    with np.load(store / "shard_00000.npz") as z:
        zeroed = {k: np.zeros_like(z[k]) if "_o" in k else z[k] for k in z.files}
    np.savez(store / "shard_00000.npz", **zeroed)                        # outputs zeroed, still an .npz
    (store / "shard_00001.npz").write_bytes((store / "shard_00001.npz").read_bytes()[:100])   # truncated
    (store / "shard_00002.npz").unlink()
    os.symlink("/dev/zero", store / "shard_00002.npz")
    (store / "shard_00003.npz").mkdir()
    (store / "shard_00099.npz").write_bytes((store / "manifest.json").read_bytes())   # no such shard
    (store / "notes.txt").write_text("stray")
    run = _top1(config, build_dir, script, LOCAL, "cpu")
    assert run.resumed == 0 and run.result.result == expected
    assert not store.exists()   # finished: removed, stray files with it


def test_sharded_quantize_stat_log_is_byte_identical(digits, ray_up, tmp_path):
    config, build_dir, _ = digits
    float_config = load_deployment(config.path)
    stat_config(float_config, force=True)
    convert_deployment(float_config, tmp_path / "b")
    model = float_config.models["digits_cnn"]
    (tmp_path / "samples").mkdir()
    with np.load(DIGITS / "test_set.npz") as z:
        for i in range(12):
            np.save(tmp_path / "samples" / f"s{i:02d}.npy", z["images"][i].transpose(1, 2, 0)[None])
    samples = load_samples(tmp_path / "samples", model.graph.inputs, "test")
    engine = stat_engine(float_config, model, tmp_path / "b")
    single = "".join(f"{line}\n" for line in log_lines(collect_stats(engine.graph, samples, engine)))
    sharded = sharded_stat.collect(float_config, model, tmp_path / "b", samples, ray_up)
    assert "".join(f"{line}\n" for line in log_lines(sharded)).encode() == single.encode()
    assert single.count("\n") == 12 * 6


def test_without_ray_the_loop_runs_in_process_with_a_note(monkeypatch):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    c = make_cluster("ray", None, 2)
    assert c.kind == "local" and install_hint("ray") in c.notes[0]

"""A sweep finishes whatever fails (issue 37, item 4): a model that does not convert, a model whose
validation FAILs and a good one, each in its deployment file: every job has its row, the failing
rows say why, the table and files are written, and the exit code is 1."""
from __future__ import annotations

import json

import numpy as np

from tests.cli_helpers import cli, digits_model, sha256, workdir, write_deployment


def test_every_job_gets_its_row_and_a_failure_exits_1(tmp_path):
    work = workdir(tmp_path)
    (work / "broken.onnx").write_bytes(b"not an ONNX model, whatever the file name says")
    np.save(work / "wrong_prob.npy", np.random.default_rng(0).uniform(-1, 0, (1, 10)).astype(np.float32))
    write_deployment(work / "good.yml", {"good": digits_model()}, library="good")
    write_deployment(work / "broken.yml", {"broken": digits_model(model_file_path="broken.onnx",
                                                                  model_sha256_checksum=sha256(work / "broken.onnx"))},
                     library="broken")
    write_deployment(work / "fails.yml", {"fails": digits_model(validation_outputs_data=["wrong_prob.npy"])},
                     library="fails")
    r = cli("sweep", "--config=good.yml", "--config=broken.yml", "--config=fails.yml", "--round=1",
            "--build_dir=out", cwd=work, timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stdout + r.stderr
    rows = {x["model"]: x for x in json.loads((work / "out/sweep/sweep.json").read_text())["rows"]}
    assert list(rows) == ["good", "broken", "fails"]   # in the order asked for, each with its row
    assert rows["good"]["passed"] is True and rows["good"]["error"] == "" and rows["good"]["latency_ms"] > 0
    assert rows["broken"]["error"].startswith("convert failed: ") and "broken.onnx" in rows["broken"]["error"]
    assert rows["broken"]["passed"] is None and rows["broken"]["latency_ms"] is None
    assert rows["fails"]["passed"] is False and rows["fails"]["error"] == "" and rows["fails"]["cosine"] < 0.5
    table = r.stdout[r.stdout.index("Sweep"):]
    for model in ("good", "broken", "fails"):
        assert model in table
    assert "convert failed" in table and "FAIL" in table and "PASS" in table
    assert "error: 2 of 3 sweep runs failed" in r.stderr
    assert "broken (cpu) on host: convert failed" in r.stderr and "fails (cpu) on host: validation FAIL" in r.stderr
    assert (work / "out/sweep/sweep.html").is_file() and (work / "out/sweep/sweep.csv").is_file()


def test_a_validation_fail_alone_exits_1(tmp_path):
    work = workdir(tmp_path)
    np.save(work / "wrong_prob.npy", -np.ones((1, 10), np.float32))
    write_deployment(work / "fails.yml", {"fails": digits_model(validation_outputs_data=["wrong_prob.npy"])},
                     library="fails")
    r = cli("sweep", "--config=fails.yml", "--round=1", "--build_dir=out", cwd=work, timeout=600)
    assert r.returncode == 1 and "1 of 1 sweep runs failed: fails (cpu) on host: validation FAIL" in r.stderr, \
        r.stdout + r.stderr


def test_sweep_flags_and_clashing_libraries_are_refused_before_any_job(tmp_path):
    """Issue 38: sweep took --device_timeout nan/inf/1e308 and --round -1 unchecked, found out
    about an --output_dir it cannot use after every job ran, and let two deployment files of one
    library_name overwrite each other's builds."""
    import time
    work = workdir(tmp_path)
    write_deployment(work / "a.yml", {"a": digits_model()}, library="same")
    write_deployment(work / "b.yml", {"b": digits_model()}, library="same")
    write_deployment(work / "c.yml", {"c": digits_model()}, library="other")
    for flag in ("--device_timeout=nan", "--device_timeout=inf", "--device_timeout=1e308", "--round=-1",
                 "--round=0", "--round=x"):
        r = cli("sweep", "--config=c.yml", flag, "--build_dir=out", cwd=work, timeout=60)
        assert r.returncode == 2 and flag.split("=")[0] in r.stderr, (flag, r.stderr)   # a usage error
    (work / "taken").write_text("x")
    start = time.monotonic()
    for args, needle in ((["--config=a.yml", "--config=b.yml"], "library_name 'same' is also"),
                         (["--config=c.yml", "--output_dir=taken"], "--output_dir taken: not a folder"),
                         (["--config=c.yml", "--output_dir=/proc/x"], "--output_dir /proc/x: cannot create")):
        r = cli("sweep", *args, "--round=1", "--build_dir=out", cwd=work, timeout=120)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert [x for x in r.stderr.splitlines() if x.startswith("error:")] and needle in r.stderr, r.stderr
    assert time.monotonic() - start < 60 and not (work / "out").exists()   # refused before converting

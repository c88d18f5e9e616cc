"""One record per runtime (mace/ir/runtimes.py, issue 32): every table that says what a runtime
is reads it, so they cannot disagree."""
from __future__ import annotations

import pytest

from mace.config import schema
from mace.ir import runtimes
from mace.ir.runtimes import RUNTIMES


def test_the_schema_reads_the_records():
    assert schema.RUNTIMES == tuple(RUNTIMES) == ("cpu", "gpu", "dsp", "hta", "apu", "htp", "cpu+gpu")
    assert schema.DEFAULT_DATA_TYPE == {"cpu": "fp32_fp32", "gpu": "fp16_fp32", "cpu+gpu": "fp16_fp32",
                                        "dsp": "uint8", "hta": "uint8", "htp": "uint8", "apu": "uint8"}
    assert set(schema.ABSENT_RUNTIMES) == {"hta", "apu", "htp"}
    for r in RUNTIMES.values():
        assert r.default_data_type in r.data_types and r.threshold_key in schema.DEFAULT_THRESHOLDS


def test_every_table_agrees_with_the_records():
    from mace.devices.runner import parse_args
    from mace.proto import pb
    from mace.report.run_csv import DEVICE_TYPES
    from mace.runtime.backends import BACKENDS
    from mace.runtime.engine import DEVICE_TAGS, GPU_DEVICES
    from mace.runtime.gpu.deploy import GPU_RUNTIMES
    from mace.transform.placement.plan import DEVICE
    from mace.validate.divergence import RUNTIMES as COMPARED

    assert set(BACKENDS) == {"cpu", "gpu", "cpu+gpu", "dsp"} == {n for n, r in RUNTIMES.items() if r.available}
    assert GPU_DEVICES == GPU_RUNTIMES == ("gpu", "cpu+gpu")
    assert DEVICE_TAGS["cpu"] == ["cpu:fast", "cpu"] and DEVICE_TAGS["dsp"] == ["int8:fast", "int8"]
    assert DEVICE_TYPES == {"cpu": "CPU", "gpu": "GPU", "cpu+gpu": "GPU", "dsp": "HEXAGON", "hta": "HTA",
                            "apu": "APU", "htp": "HTP"}
    assert DEVICE == {"cpu": pb.CPU, "gpu": pb.GPU, "dsp": pb.HEXAGON}
    assert COMPARED["gpu"] == ["cpu", "gpu"] and COMPARED["cpu"] == ["cpu"]
    for name in runtimes.BOARD_RUNTIMES:
        assert parse_args(["--model", "m.pb", f"--runtime={name}"]).runtime == name
    with pytest.raises(SystemExit):
        parse_args(["--model", "m.pb", "--runtime=hta"])


@pytest.mark.parametrize("runtime, key", [("cpu", "CPU"), ("gpu", "GPU"), ("cpu+gpu", "GPU"), ("dsp", "HEXAGON")])
def test_thresholds_come_from_the_record(tmp_path, runtime, key):
    from mace.config import load_deployment

    (tmp_path / "d.yml").write_text(f"""library_name: t
models:
  m:
    platform: onnx
    model_file_path: m.onnx
    model_sha256_checksum: {'0' * 64}
    runtime: {runtime}
    subgraphs:
      - input_tensors: x
        input_shapes: 1,2
        output_tensors: y
""")
    sg = load_deployment(tmp_path / "d.yml").models["m"].graph
    assert sg.threshold() == schema.DEFAULT_THRESHOLDS["QUANTIZE" if runtime == "dsp" else key]
    assert runtimes.runtime("hexagon").name == "dsp"
    with pytest.raises(KeyError, match="no runtime 'tpu'"):
        runtimes.runtime("tpu")


def test_what_a_runtime_implies_is_read_from_its_record():
    from mace.ir.runtimes import DSP_BACKEND_RUNTIMES, QUANTIZED_ONLY, QUANTIZED_RUNTIMES, RUNTIMES
    assert QUANTIZED_ONLY == ("dsp", "hta", "htp") and DSP_BACKEND_RUNTIMES == ("dsp",)
    assert QUANTIZED_RUNTIMES == ("cpu", "dsp")   # quantize: 1 runs on the CPU's int8 kernels and the DSP
    assert not any(RUNTIMES[n].quantized_only for n in ("cpu", "gpu", "cpu+gpu", "apu"))


def test_no_module_asks_a_runtime_by_its_name_what_its_record_says():
    """`runtime == "dsp"` meant 'quantized only', 'a DSP backend' or 'fixed shapes' in 19 places;
    each is a record property now (quantized_only, dsp_backend, fixed_shapes)."""
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[2] / "mace"
    pattern = re.compile(r"""(==|!=)\s*["']dsp["']|["']dsp["']\s+(not\s+)?in\s""")
    found = [f"{p.relative_to(root)}:{i}" for p in root.rglob("*.py") if p.name != "runtimes.py"
             for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert found == [], found

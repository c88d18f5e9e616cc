"""Fuzz targets: each feeds one mutated file to one loader, as the CLI would.

A target passes when the loader accepts the input or raises a MaceError (one clear
message, exit 1 in the CLI). Anything else (IndexError, RecursionError, a
MemoryError, an `internal error`) is a finding. Used by tests/fuzz/test_fuzz.py
(hypothesis, a short run in CI) and tools/fuzz.py (a long run with progress).

Seeds are in tests/fuzz/corpus/: the digits example's deployment file, ONNX model,
converted .pb/.data and an input .npy; a small TensorFlow GraphDef; the Caffe
example's prototxt. `mutate` makes the inputs: bit flips, byte overwrites with
boundary values, truncation, duplication of a slice, insertion of random bytes.
"""
from __future__ import annotations

import random
import tempfile
from pathlib import Path

from mace.config.specs import ModelSpec, TensorSpec
from mace.errors import MaceError

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"
INTERESTING = [0x00, 0x01, 0x7F, 0x80, 0xFF, 0x22, 0x27, 0x5B, 0x7B, 0x2D, 0x3A, 0x0A]


def mutate(data: bytes, rng: random.Random, rounds: int = 1) -> bytes:
    """`rounds` random mutations of `data` (deterministic for a seeded rng)."""
    buf = bytearray(data)
    for _ in range(rounds):
        kind = rng.randrange(6)
        at = rng.randrange(len(buf)) if buf else 0
        if kind == 0 and buf:
            buf[at] ^= 1 << rng.randrange(8)
        elif kind == 1 and buf:
            buf[at] = rng.choice(INTERESTING)
        elif kind == 2:
            del buf[rng.randrange(len(buf) + 1):]
        elif kind == 3 and buf:
            end = min(len(buf), at + rng.randrange(1, 64))
            buf[at:at] = buf[at:end] * rng.randrange(1, 4)
        elif kind == 4:
            buf[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
        elif buf:
            end = min(len(buf), at + rng.randrange(1, 32))
            del buf[at:end]
    return bytes(buf)


def _deployment(data: bytes, work: Path) -> None:
    from mace.config.deployment import load_deployment

    path = work / "deploy.yml"
    path.write_bytes(data)
    load_deployment(path)


def _digits_spec(path: Path, fmt: str = "NHWC", outputs=("prob",), weights=None) -> ModelSpec:
    return ModelSpec(path, [TensorSpec("image" if weights is None else "data", (1, 8, 8, 1), fmt)],
                     [TensorSpec(o, None, "NONE") for o in outputs], weights, "fuzz")


def _frontend(platform: str, spec: ModelSpec) -> None:
    from mace import frontends
    from mace.transform.pipeline import transform

    transform(frontends.convert(platform, spec), {"runtime": "cpu"})


def _onnx(data: bytes, work: Path) -> None:
    path = work / "model.onnx"
    path.write_bytes(data)
    _frontend("onnx", _digits_spec(path))


def _tensorflow(data: bytes, work: Path) -> None:
    path = work / "graph.pb"
    path.write_bytes(data)
    _frontend("tensorflow", ModelSpec(path, [TensorSpec("x", (1, 4, 4, 2), "NHWC")],
                                      [TensorSpec("y", None, "NONE")], None, "fuzz"))


def _caffe(data: bytes, work: Path) -> None:
    path = work / "net.prototxt"
    path.write_bytes(data)
    _frontend("caffe", _digits_spec(path, outputs=("prob",),
                                    weights=ROOT / "examples" / "caffe" / "digits_caffe.caffemodel"))


def _ir(data: bytes, work: Path) -> None:
    import numpy as np

    from mace.runtime.engine import create_engine

    path = work / "model.pb"
    path.write_bytes(data)
    engine = create_engine(path, CORPUS / "model.data")
    engine.run({name: np.zeros(shape, dtype) for name, (shape, dtype) in engine.input_specs().items()})


def _npy(data: bytes, work: Path) -> None:
    from mace.config.files import load_npy

    path = work / "input.npy"
    path.write_bytes(data)
    load_npy(path, TensorSpec("image", (1, 8, 8, 1), "NHWC"), "fuzz")


# name -> (seed file in the corpus, target)
TARGETS = {
    "deployment": ("deploy.yml", _deployment),
    "onnx": ("model.onnx", _onnx),
    "tensorflow": ("graph.pb", _tensorflow),
    "caffe": ("net.prototxt", _caffe),
    "ir": ("model.pb", _ir),
    "npy": ("input.npy", _npy),
}


def seed(name: str) -> bytes:
    return (CORPUS / TARGETS[name][0]).read_bytes()


def run_one(name: str, data: bytes) -> BaseException | None:
    """Feed `data` to target `name`; returns the exception that is a finding, else None."""
    with tempfile.TemporaryDirectory(prefix="mace-fuzz-") as tmp:
        try:
            TARGETS[name][1](data, Path(tmp))
        except MaceError:
            return None
        except Exception as e:  # noqa: BLE001 - anything else is what fuzzing looks for
            return e
    return None


def signature(err: BaseException) -> str:
    """A finding's bucket: the exception type and where it was raised in mace/."""
    tb, where = err.__traceback__, "?"
    while tb is not None:
        frame = tb.tb_frame
        if "/mace/" in frame.f_code.co_filename:
            where = f"{Path(frame.f_code.co_filename).name}:{tb.tb_lineno}"
        tb = tb.tb_next
    return f"{type(err).__name__} at {where}"

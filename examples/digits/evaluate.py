#!/usr/bin/env python3
"""Accuracy of the converted digits model on the held-out test set, next to onnxruntime's.

    python tools/converter.py convert --config=examples/digits/digits.yml
    python examples/digits/evaluate.py

The converted model (builds/digits/model/digits_cnn.pb + .data) takes NHWC input
(1,8,8,1), as digits.yml asks; onnxruntime runs the original .onnx, which takes NCHW
(1,1,8,8). Both are fed the same 450 images from test_set.npz, one at a time.
Run from the repository root (paths are relative to it, as in the deployment file),
or pass --model / --onnx / --test-set.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CONVERT_HINT = "run: python tools/converter.py convert --config=examples/digits/digits.yml"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="builds/digits/model/digits_cnn.pb",
                    help="converted model graph (.pb); its .data file must sit next to it")
    ap.add_argument("--data", default=None, help="weights file (default: the .pb's .data)")
    ap.add_argument("--onnx", default=str(HERE / "digits_cnn.onnx"), help="original ONNX model")
    ap.add_argument("--test-set", default=str(HERE / "test_set.npz"))
    ap.add_argument("--no-onnxruntime", action="store_true",
                    help="skip the onnxruntime reference")
    return ap.parse_args(argv)


def load_engine(pb: Path, data: Path | None):
    data = data or pb.with_suffix(".data")
    missing = [str(p) for p in (pb, data) if not p.is_file()]
    if missing:
        sys.exit(f"error: converted model not found ({', '.join(missing)}); the model has not "
                 f"been converted yet.\n{CONVERT_HINT}\n(from the repository root)")
    from mace.runtime.engine import create_engine
    return create_engine(str(pb), str(data))


def engine_probs(engine, images_nchw):
    out = []
    for img in images_nchw:
        x = np.ascontiguousarray(img.transpose(1, 2, 0)[None], dtype=np.float32)  # (1,8,8,1)
        out.append(np.asarray(engine.run({"image": x})["prob"]).reshape(1, -1))
    return np.concatenate(out)


def onnxruntime_probs(onnx_path: Path, images_nchw):
    import onnxruntime as ort
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    return np.concatenate([sess.run(["prob"], {"image": img[None].astype(np.float32)})[0]
                           for img in images_nchw])


def main(argv=None) -> int:
    args = parse_args(argv)
    test_set = Path(args.test_set)
    if not test_set.is_file():
        sys.exit(f"error: {test_set} not found; regenerate it with "
                 f"python examples/digits/make_model.py")
    with np.load(test_set) as z:
        images, labels = z["images"], z["labels"]          # (N,1,8,8) float32, (N,) int64

    engine = load_engine(Path(args.model), Path(args.data) if args.data else None)
    prob = engine_probs(engine, images)
    pred = prob.argmax(axis=1)
    n = len(labels)
    acc = float((pred == labels).mean())
    print(f"test images:                 {n}")
    print(f"converted model ({Path(args.model).name}): accuracy {acc:.4f} "
          f"({int((pred == labels).sum())}/{n})")

    if args.no_onnxruntime:
        return 0
    ref = onnxruntime_probs(Path(args.onnx), images)
    ref_pred = ref.argmax(axis=1)
    ref_acc = float((ref_pred == labels).mean())
    print(f"onnxruntime ({Path(args.onnx).name}): accuracy {ref_acc:.4f} "
          f"({int((ref_pred == labels).sum())}/{n})")
    agree = int((pred == ref_pred).sum())
    print(f"top-1 agreement:             {agree}/{n}; max |prob difference| "
          f"{float(np.abs(prob - ref).max()):.2e}")
    if agree != n:
        print("WARNING: the converted model and onnxruntime disagree on some images")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

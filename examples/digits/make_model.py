#!/usr/bin/env python3
"""Train the bundled example model (a tiny CNN on scikit-learn's digits) and export it to ONNX.

Everything here is plain numpy (forward and backward written by hand), seeded, and
needs no network: scikit-learn ships the digits data set (1797 8x8 grayscale images,
10 classes) inside the package.

Network (NCHW, as exported):
    image [1,1,8,8]
    -> Conv 3x3, 1->8, pad 1 (no bias) -> BatchNormalization -> Relu
    -> Conv 3x3, 8->16, stride 2, pad 1 (+bias)                -> Relu      [1,16,4,4]
    -> Flatten (256) -> Gemm (->10) -> Softmax                               prob [1,10]

BatchNormalization is trained with batch statistics; its mean/variance are
re-estimated over the whole training set after training and exported as an ONNX
BatchNormalization node (so the converter's folding passes have work to do), and
the Relu nodes are kept separate for the same reason.

Outputs (next to this file):
    digits_cnn.onnx         the model (byte-for-byte reproducible on one machine; training is
                            float arithmetic, so another CPU or BLAS gives other last bits: its
                            sha256 is written into digits.yml and digits_accuracy.yml)
    inputs/image_{0..4}.npy five held-out test images, NHWC (1,8,8,1) float32
    inputs/labels.json      their true labels
    test_set.npz            all held-out images, NCHW (N,1,8,8) float32, + labels int64

Run from anywhere:  python examples/digits/make_model.py
"""
from __future__ import annotations

import hashlib
import io
import json
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEPLOYMENT_FILES = ("digits.yml", "digits_accuracy.yml")   # they name digits_cnn.onnx
WHY = "pinned to the model just trained: numpy's float results (BLAS, SIMD) differ between CPUs and builds"
SEED = 0
EPOCHS = 30
BATCH = 32
LR = 3e-3
BN_EPS = 1e-5
OPSET = 13
IR_VERSION = 8          # the ONNX IR version that goes with opset 13


# ----------------------------------------------------------------------------- data
def load_data():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = digits.images.astype(np.float64) / 8.0 - 1.0          # pixel values 0..16 -> [-1, 1]
    x = x[:, None, :, :]                                       # NCHW
    y = digits.target.astype(np.int64)
    return train_test_split(x, y, test_size=0.25, random_state=0)


# ----------------------------------------------------------------------------- layers
def im2col(x, stride, pad):
    """x (N,C,H,W) -> patches (N*Ho*Wo, C*9) for a 3x3 kernel, plus the output size."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho, wo = (h + 2 * pad - 3) // stride + 1, (w + 2 * pad - 3) // stride + 1
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # N,C,H',W',3,3
    win = win[:, :, :stride * (ho - 1) + 1:stride, :stride * (wo - 1) + 1:stride]
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(n * ho * wo, c * 9)
    return np.ascontiguousarray(cols), (ho, wo)


def col2im(dcols, x_shape, stride, pad, out_hw):
    """Adjoint of im2col: scatter-add patch gradients back to an (N,C,H,W) gradient."""
    n, c, h, w = x_shape
    ho, wo = out_hw
    d = dcols.reshape(n, ho, wo, c, 3, 3)
    dxp = np.zeros((n, c, h + 2 * pad, w + 2 * pad))
    for i in range(3):
        for j in range(3):
            dxp[:, :, i:i + stride * ho:stride, j:j + stride * wo:stride] += \
                d[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return dxp[:, :, pad:pad + h, pad:pad + w]


def conv_forward(x, w, b, stride, pad):
    n = x.shape[0]
    cols, (ho, wo) = im2col(x, stride, pad)
    out = cols @ w.reshape(w.shape[0], -1).T
    if b is not None:
        out = out + b
    out = out.reshape(n, ho, wo, w.shape[0]).transpose(0, 3, 1, 2)
    return out, (cols, x.shape, (ho, wo))


def conv_backward(dout, w, cache, stride, pad, need_dx):
    cols, x_shape, hw = cache
    d = dout.transpose(0, 2, 3, 1).reshape(-1, w.shape[0])          # (N*Ho*Wo, O)
    dw = (d.T @ cols).reshape(w.shape)
    db = d.sum(axis=0)
    dx = col2im(d @ w.reshape(w.shape[0], -1), x_shape, stride, pad, hw) if need_dx else None
    return dx, dw, db


def softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


# ----------------------------------------------------------------------------- model
def init_params(rng):
    def he(shape, fan_in):
        return rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)

    return {
        "conv1_w": he((8, 1, 3, 3), 9),
        "bn_gamma": np.ones(8), "bn_beta": np.zeros(8),
        "conv2_w": he((16, 8, 3, 3), 72), "conv2_b": np.zeros(16),
        "fc_w": rng.standard_normal((10, 256)) * np.sqrt(1.0 / 256), "fc_b": np.zeros(10),
    }


def forward(p, x, bn_stats=None):
    """bn_stats None: training mode (batch statistics). Else (mean, var): inference mode."""
    c1, cache1 = conv_forward(x, p["conv1_w"], None, 1, 1)
    if bn_stats is None:
        mean, var = c1.mean(axis=(0, 2, 3)), c1.var(axis=(0, 2, 3))
    else:
        mean, var = bn_stats
    inv = 1.0 / np.sqrt(var + BN_EPS)
    xhat = (c1 - mean[None, :, None, None]) * inv[None, :, None, None]
    bn = xhat * p["bn_gamma"][None, :, None, None] + p["bn_beta"][None, :, None, None]
    r1 = np.maximum(bn, 0.0)
    c2, cache2 = conv_forward(r1, p["conv2_w"], p["conv2_b"], 2, 1)
    r2 = np.maximum(c2, 0.0)
    flat = r2.reshape(r2.shape[0], -1)                                 # ONNX Flatten(axis=1)
    logits = flat @ p["fc_w"].T + p["fc_b"]
    cache = (cache1, c1, xhat, inv, bn, r1, cache2, c2, flat)
    return logits, cache


def backward(p, cache, dlogits):
    cache1, c1, xhat, inv, bn, r1, cache2, c2, flat = cache
    g = {"fc_w": dlogits.T @ flat, "fc_b": dlogits.sum(axis=0)}
    dflat = dlogits @ p["fc_w"]
    dc2 = dflat.reshape(c2.shape) * (c2 > 0)
    dr1, g["conv2_w"], g["conv2_b"] = conv_backward(dc2, p["conv2_w"], cache2, 2, 1, True)
    dbn = dr1 * (bn > 0)
    g["bn_gamma"] = (dbn * xhat).sum(axis=(0, 2, 3))
    g["bn_beta"] = dbn.sum(axis=(0, 2, 3))
    dxhat = dbn * p["bn_gamma"][None, :, None, None]
    m = c1.shape[0] * c1.shape[2] * c1.shape[3]
    # batch-norm backward (batch statistics), per channel
    dc1 = (inv[None, :, None, None] / m) * (
        m * dxhat - dxhat.sum(axis=(0, 2, 3), keepdims=True)
        - xhat * (dxhat * xhat).sum(axis=(0, 2, 3), keepdims=True))
    _, g["conv1_w"], _ = conv_backward(dc1, p["conv1_w"], cache1, 1, 1, False)
    return g


def train(x_tr, y_tr, rng):
    p = init_params(rng)
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(val) for k, val in p.items()}
    b1, b2, eps = 0.9, 0.999, 1e-8
    n, step = len(x_tr), 0
    steps_total = EPOCHS * ((n + BATCH - 1) // BATCH)
    for epoch in range(EPOCHS):
        order = rng.permutation(n)
        loss_sum = 0.0
        for s in range(0, n, BATCH):
            idx = order[s:s + BATCH]
            xb, yb = x_tr[idx], y_tr[idx]
            logits, cache = forward(p, xb)
            prob = softmax(logits)
            loss_sum += -np.log(prob[np.arange(len(yb)), yb] + 1e-12).sum()
            dlogits = prob.copy()
            dlogits[np.arange(len(yb)), yb] -= 1.0
            dlogits /= len(yb)
            grads = backward(p, cache, dlogits)
            step += 1
            lr = LR * 0.5 * (1.0 + np.cos(np.pi * (step - 1) / steps_total))   # cosine decay
            for k in p:
                gk = grads[k] + (1e-4 * p[k] if k.endswith("_w") else 0.0)      # small L2 on weights
                m[k] = b1 * m[k] + (1 - b1) * gk
                v[k] = b2 * v[k] + (1 - b2) * gk * gk
                mh, vh = m[k] / (1 - b1 ** step), v[k] / (1 - b2 ** step)
                p[k] -= lr * mh / (np.sqrt(vh) + eps)
        if epoch % 5 == 4 or epoch == EPOCHS - 1:
            print(f"  epoch {epoch + 1:2d}/{EPOCHS}: train loss {loss_sum / n:.4f}")
    # population statistics of the first conv's output over the training set, for inference
    c1, _ = conv_forward(x_tr, p["conv1_w"], None, 1, 1)
    bn_stats = (c1.mean(axis=(0, 2, 3)), c1.var(axis=(0, 2, 3)))
    return p, bn_stats


def to_float32(p, bn_stats):
    q = {k: v.astype(np.float32) for k, v in p.items()}
    q["bn_mean"], q["bn_var"] = (s.astype(np.float32) for s in bn_stats)
    return q


def numpy_predict(q, x):
    """Inference with the exported float32 parameters (mirrors the ONNX graph)."""
    x = x.astype(np.float32)
    logits, _ = forward(q, x, (q["bn_mean"], q["bn_var"]))
    return softmax(logits.astype(np.float64))


# ----------------------------------------------------------------------------- export
def export_onnx(q, path: Path) -> bytes:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def init(name, arr):
        return numpy_helper.from_array(np.ascontiguousarray(arr, dtype=np.float32), name)

    nodes = [
        helper.make_node("Conv", ["image", "conv1.weight"], ["conv1"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("BatchNormalization",
                         ["conv1", "bn1.scale", "bn1.bias", "bn1.mean", "bn1.var"], ["bn1"],
                         name="bn1", epsilon=BN_EPS),
        helper.make_node("Relu", ["bn1"], ["relu1"], name="relu1"),
        helper.make_node("Conv", ["relu1", "conv2.weight", "conv2.bias"], ["conv2"], name="conv2",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["conv2"], ["relu2"], name="relu2"),
        helper.make_node("Flatten", ["relu2"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc",
                         transB=1),
        helper.make_node("Softmax", ["logits"], ["prob"], name="softmax", axis=1),
    ]
    initializers = [
        init("conv1.weight", q["conv1_w"]),
        init("bn1.scale", q["bn_gamma"]), init("bn1.bias", q["bn_beta"]),
        init("bn1.mean", q["bn_mean"]), init("bn1.var", q["bn_var"]),
        init("conv2.weight", q["conv2_w"]), init("conv2.bias", q["conv2_b"]),
        init("fc.weight", q["fc_w"]), init("fc.bias", q["fc_b"]),
    ]
    graph = helper.make_graph(
        nodes, "digits_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 8, 8])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 10])],
        initializer=initializers)
    # Pin every field that could otherwise depend on the installed onnx version.
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              ir_version=IR_VERSION, producer_name="mace-examples-digits",
                              producer_version="1", doc_string="")
    model.model_version = 1
    onnx.checker.check_model(model, full_check=True)
    data = model.SerializeToString(deterministic=True)
    _write_bytes(path, data)
    return data


# ----------------------------------------------------------------------------- files
def _write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def _npy_bytes(arr) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def save_npz(path: Path, **arrays) -> None:
    """Like np.savez but reproducible: fixed member timestamps and order."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name in sorted(arrays):
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            zf.writestr(info, _npy_bytes(arrays[name]))
    _write_bytes(path, buf.getvalue())


def write_inputs(x_te, y_te) -> None:
    out = HERE / "inputs"
    labels = {}
    for i in range(5):
        nhwc = x_te[i:i + 1].transpose(0, 2, 3, 1).astype(np.float32)   # (1,8,8,1)
        _write_bytes(out / f"image_{i}.npy", _npy_bytes(nhwc))
        labels[f"image_{i}.npy"] = int(y_te[i])
    _write_bytes(out / "labels.json", (json.dumps(labels, indent=2, sort_keys=True) + "\n").encode())
    save_npz(HERE / "test_set.npz", images=x_te.astype(np.float32), labels=y_te.astype(np.int64))


# ----------------------------------------------------------------------------- main
def onnxruntime_predict(model_bytes: bytes, x_nchw) -> np.ndarray:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model_bytes, opts, providers=["CPUExecutionProvider"])
    return np.concatenate([sess.run(["prob"], {"image": x_nchw[i:i + 1].astype(np.float32)})[0]
                           for i in range(len(x_nchw))])


def main() -> int:
    t0 = time.perf_counter()
    rng = np.random.default_rng(SEED)
    x_tr, x_te, y_tr, y_te = load_data()
    print(f"digits: {len(x_tr)} train / {len(x_te)} test images")
    p, bn_stats = train(x_tr, y_tr, rng)
    t_train = time.perf_counter() - t0
    q = to_float32(p, bn_stats)

    acc_train = float((numpy_predict(q, x_tr).argmax(1) == y_tr).mean())
    prob_np = numpy_predict(q, x_te)
    acc_np = float((prob_np.argmax(1) == y_te).mean())
    print(f"training took {t_train:.1f} s; train accuracy {acc_train:.4f}")
    print(f"numpy test accuracy:       {acc_np:.4f} ({int(round(acc_np * len(y_te)))}/{len(y_te)})")

    onnx_path = HERE / "digits_cnn.onnx"
    data = export_onnx(q, onnx_path)
    write_inputs(x_te, y_te)

    prob_ort = onnxruntime_predict(data, x_te)
    acc_ort = float((prob_ort.argmax(1) == y_te).mean())
    agree = float((prob_ort.argmax(1) == prob_np.argmax(1)).mean())
    print(f"onnxruntime test accuracy: {acc_ort:.4f} (argmax agreement with numpy {agree:.4f}, "
          f"max |prob diff| {np.abs(prob_ort - prob_np).max():.2e})")
    print(f"wrote {onnx_path.relative_to(HERE.parent.parent)} ({len(data)} bytes, "
          f"sha256 {hashlib.sha256(data).hexdigest()})")
    pin_checksums(onnx_path)
    print(f"total time {time.perf_counter() - t0:.1f} s")

    if acc_np < 0.90:
        print("ERROR: test accuracy below 0.90")
        return 1
    # two float implementations: an image whose top two probabilities all but tie may go either
    # way on some CPU; more than one such image is a broken export
    if abs(acc_ort - acc_np) * len(y_te) > 1.5:
        print("ERROR: onnxruntime does not reproduce the numpy model's test accuracy")
        return 1
    return 0


def pin_checksums(onnx_path: Path) -> None:
    """Write the new model's sha256 into the deployment files that name it (only that value)."""
    sys.path.insert(0, str(HERE.parent.parent))   # mace, when run from a checkout not installed
    from mace.config.pin_checksum import pin_checksum

    for name in DEPLOYMENT_FILES:
        yml = HERE / name
        if yml.exists():
            for pinned in pin_checksum(yml, onnx_path, required=True):
                print(f"  {name}: {pinned.describe(WHY)}")


if __name__ == "__main__":
    raise SystemExit(main())

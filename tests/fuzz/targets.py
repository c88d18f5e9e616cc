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


def _tflite(data: bytes, work: Path) -> None:
    """An int8 conv + relu (per-channel weights, quantized activations): the reader's index,
    per-channel and scale checks, then the frontend and the passes."""
    path = work / "model.tflite"
    path.write_bytes(data)
    _frontend("tflite", ModelSpec(path, [TensorSpec("x0", (1, 4, 4, 2), "NHWC")],
                                  [TensorSpec("Identity", None, "NONE")], None, "fuzz"))


def _image(name: str):
    def target(data: bytes, work: Path) -> None:
        from mace.config.images import decode, for_input, parse_image_preprocess

        path = work / name
        path.write_bytes(data)
        prep = for_input(parse_image_preprocess({"channel_order": "RGB", "resize": 8}), "data")
        spec = TensorSpec("data", (1, 8, 8, 3), "NHWC", "float32", (-1.0, 1.0), prep)
        _finite(decode(path, spec, prep, "fuzz"), path)
    return target


def _finite(value, what) -> None:
    import numpy as np

    if not np.isfinite(value).all():   # accepted, then inf or nan in the tensor: garbage
        raise AssertionError(f"{what}: decoded to non-finite values")


# image_preprocess values that are numbers, strings or lists of the wrong kind or size
HOSTILE_VALUES = [0, -1, 1e-45, 1e-300, 1e308, float("nan"), float("inf"), -float("inf"), 2**31, 10**30, "x",
                  [], [1, 2], [1, 2, 3, 4], True, None, {}, "8,99999", 16384, 0.5, "nan", "-0", [1e308, 1, 1]]


def _image_preprocess(data: bytes, work: Path) -> None:
    """The key's mapping (the seed, mutated as text), with hostile values put in by a generator
    seeded from the bytes; what is accepted must decode the seed PNG to finite values."""
    import yaml

    from mace.config.images import ORDERS, decode, for_input, parse_image_preprocess

    try:
        raw = yaml.safe_load(data.decode("utf-8", "replace"))
    except (yaml.YAMLError, RecursionError):
        return   # the deployment target fuzzes YAML itself
    if data != seed("image_preprocess") and isinstance(raw, dict):
        rng = random.Random(data)
        for _ in range(rng.randrange(1, 3)):
            raw[rng.choice(["resize", "resample", "channel_order", "mean", "std", "scale", "layout"])] = \
                rng.choice(HOSTILE_VALUES)
    try:
        prep = for_input(parse_image_preprocess(raw), "data")
    except ValueError:   # the schema's contract: the loader names the key (config/schema.py)
        return
    if prep is None:   # an empty key: no image preprocessing
        return
    channels = ORDERS[prep.channel_order]
    layout = prep.layout or "NHWC"
    shape = (1, 8, 8, channels) if layout == "NHWC" else (1, channels, 8, 8)
    spec = TensorSpec("data", shape, layout, "float32", (-1.0, 1.0), prep)
    _finite(decode(CORPUS / "image.png", spec, prep, "fuzz"), "image_preprocess")


def _ray_address(data: bytes, work: Path) -> None:
    """--ray_address and RAY_ADDRESS: refused as a ConfigError, or a form ray.init takes."""
    from mace.scale.runner import address_of, make_cluster

    text = data.decode("utf-8", "replace").replace("\x00", "")   # argv and the environment hold no NUL
    for address, source in (address_of(text or None, {}), address_of(None, {"RAY_ADDRESS": text})):
        cluster = make_cluster("ray", address, 2, source)
        if cluster.kind != "ray" or cluster.address in (None, "auto"):
            continue
        port = cluster.address.rpartition(":")[2]
        if not (port.isdigit() and 1 <= int(port) <= 65535):
            raise AssertionError(f"accepted {cluster.address!r}: no port Ray can use")


# (method, body) an accuracy script may hold: nonsense returns, raising, exiting, hanging
SCRIPT_BODIES = {
    "sample_size": ["return None", "return float('nan')", "return float('inf')", "return 'x'", "return 2.5",
                    "return 0", "return -5", "return 10 ** 5000", "return 10 ** 12", "return True",
                    "return np.int64(3)", "return [3]", "return np.array([3, 4])"],
    "batch_size": ["return 0", "return 10 ** 30", "return None", "return 2", "return np.float64(1)"],
    "preprocess": ["return None", "return {}", "return {'other': np.zeros((1, 8, 8, 1))}",
                   "return {'image': 'abc'}", "return {'image': [[1.0, 2.0], [3.0]]}",
                   "return {'image': (x for x in range(64))}",
                   "return {'image': np.zeros((1, 8, 8, 1), np.complex64) + 1j}",
                   "return {'image': np.zeros((0, 8, 8, 1))}", "return {'image': np.full((1, 8, 8, 1), np.nan)}",
                   "return {'image': np.zeros((1, 8, 8, 2))}", "return {'image': ['missing.png']}",
                   "return {'image': np.zeros((1, 8, 8, 1), object)}", "return {'image': 10 ** 5000}",
                   "return {'image': np.zeros((end - start, 8, 8, 1)) + 1e300}",
                   "return {'image': [np.zeros((8, 8, 1))] * (end - start)}", "return [np.zeros((1, 8, 8, 1))]",
                   "return {'image': np.zeros((1, 64), np.int64)}", "return {'image': np.datetime64('2020')}"],
    "postprocess": ["raise ValueError('bad label')", "return 1 / 0", "output_map.clear()"],
    "result": ["return object()", "return 10 ** 5000", "return float('nan')", "return (x for x in [])",
               "print('x' * 100)", "return {'a': np.float32(1)}"],
    "__init__": ["raise ImportError('cv3')", "self.n = 0\n        import sys\n        sys.exit(0)"],
}
ANY_BODY = ["raise KeyError('post')", "import sys\n        sys.exit(3)", "import os\n        os._exit(0)",
            "raise SystemExit", "raise RecursionError", "raise MemoryError", "while True:\n            pass"]


def _accuracy_script(data: bytes, work: Path) -> None:
    """MACE's AccuracyValidator over a stand-in model (zeros out): the mutated script as text, or
    the seed with one or two methods replaced by hostile bodies chosen from the bytes. Every
    failure must be the script's error (ScriptError), never ours, an exit or a hang."""
    import os

    import numpy as np

    from mace.validate.accuracy import TIMEOUT_ENV, evaluate, load_validator

    text = data.decode("utf-8", "replace")
    if data != seed("accuracy_script"):
        rng = random.Random(data)
        if rng.random() < 0.7:   # hostile bodies in the seed, else the mutated text as it is
            text = seed("accuracy_script").decode()
            for _ in range(rng.randrange(1, 3)):
                method = rng.choice(sorted(SCRIPT_BODIES))
                body = rng.choice(SCRIPT_BODIES[method] + ANY_BODY)
                head = f"    def {method}(self"
                start = text.index(head)
                at = text.index("\n", text.index("):", start)) + 1
                end = text.find("\n\n", at)
                text = text[:at] + f"        {body}\n" + (text[end:] if end >= 0 else "")
    path = work / "acc.py"
    path.write_text(text, errors="replace")
    saved = os.environ.get(TIMEOUT_ENV)
    os.environ[TIMEOUT_ENV] = "1"   # a hanging body meets its timeout in a second
    try:
        validator = load_validator(path, "fuzz")
        evaluate(validator, lambda inputs: {"prob": np.zeros((len(inputs["image"]), 10), np.float32)},
                 [TensorSpec("image", (1, 8, 8, 1), "NHWC")])
    finally:
        if saved is None:
            os.environ.pop(TIMEOUT_ENV, None)
        else:
            os.environ[TIMEOUT_ENV] = saved


def _digits_deployment(work: Path) -> Path:
    """The corpus deployment file with its model and data paths absolute (the target's cwd may differ)."""
    path = work / "deploy.yml"
    path.write_text(seed("deployment").decode().replace(" examples/", f" {ROOT}/examples/")
                    .replace("[examples/", f"[{ROOT}/examples/"))
    return path


def _manifest(data: bytes, work: Path) -> None:
    """The build manifest of the digits build (its real .pb and .data beside it) through
    check_build, as every command that opens a model calls it."""
    import shutil

    from mace.config.deployment import load_deployment
    from mace.config.provenance import check_build

    model_dir = work / "builds" / "digits" / "model"
    model_dir.mkdir(parents=True)
    shutil.copy(CORPUS / "model.pb", model_dir / "digits_cnn.pb")
    shutil.copy(CORPUS / "model.data", model_dir / "digits_cnn.data")
    (model_dir / "digits_cnn.manifest.json").write_bytes(data)
    config = load_deployment(_digits_deployment(work))
    check_build(config, config.models["digits_cnn"], work / "builds")


def _shard(data: bytes, work: Path) -> None:
    """A resumed accuracy shard whose sha256 the store's manifest records (as if the manifest was
    edited with it): ShardStore.open and the resume check (mace/scale/accuracy.py, resumable)
    keep it only if it is what a worker saves; what is kept must give every batch's outputs."""
    import hashlib
    import json

    from mace.scale.accuracy import resumable
    from mace.scale.shards import MANIFEST, Shard, ShardStore

    store_dir = work / "accuracy"
    store_dir.mkdir()
    (store_dir / "shard_00000.npz").write_bytes(data)
    (store_dir / MANIFEST).write_text(json.dumps({"key": "fuzz", "shards": {"0": hashlib.sha256(data).hexdigest()}}))
    store = ShardStore(store_dir, "fuzz")
    shards = [Shard(0, ((0, 2), (2, 3)))]
    for index in resumable(store, store.open(True, 1), shards, ["prob"]):
        arrays = store.load(index)
        for j, _ in enumerate(shards[index].ranges):   # what evaluate's drain reads
            _ = {"prob": arrays[f"b{j}_o0"]}, int(arrays[f"b{j}_pad"])


def _sweep(data: bytes, work: Path) -> None:
    """`sweep`'s command line (two deployment files, a.yml and b.yml, the digits one; b.yml with
    another library_name) through the real parser and every check sweep makes before its first
    job; run in the work folder (an --output_dir is made there, or refused)."""
    import contextlib
    import io
    import os
    import shlex

    from mace.cli import _cluster
    from mace.cli.main import build_parser
    from mace.cli.sweep_cmd import _check_before_running
    from mace.config import load_deployment
    from mace.scale import variants as variant_lib

    text = data.decode("utf-8", "replace").replace("\x00", "")   # argv holds no NUL
    try:
        argv = shlex.split(text)
    except ValueError:
        argv = text.split()
    deploy = _digits_deployment(work).read_text()
    (work / "a.yml").write_text(deploy)
    (work / "b.yml").write_text(deploy.replace("library_name: digits", "library_name: digits_b"))
    cwd = os.getcwd()
    os.chdir(work)
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            try:
                args = build_parser().parse_args(["sweep", *argv])
            except SystemExit as e:
                if e.code == 2:   # a usage error, argparse's message
                    return
                raise AssertionError(f"argparse exited {e.code!r}") from None
        configs = [load_deployment(path) for path in args.config]
        variant_lib.parse(args.runtimes)
        _check_before_running(configs, args.output_dir or f"{args.build_dir}/sweep")
        _cluster.cluster_of(args)
    finally:
        os.chdir(cwd)


def _url(data: bytes, work: Path) -> None:
    """A model URL served by a loopback HTTP server that answers with the mutated bytes (status
    line, headers, body) and closes: fetch downloads it within its limits (a small size limit and
    deadline here) and keeps it only if its sha256 is the seed body's."""
    import hashlib
    import os
    import socket
    import threading

    from mace.config.fetch import DEADLINE_ENV, DOWNLOAD_LIMIT_ENV, fetch

    body = seed("url").split(b"\r\n\r\n", 1)[1]
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)

    def answer():
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(5)
            try:
                conn.recv(65536)
                conn.sendall(data)
                conn.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    saved = {k: os.environ.get(k) for k in (DEADLINE_ENV, DOWNLOAD_LIMIT_ENV)}
    os.environ.update({DEADLINE_ENV: "5", DOWNLOAD_LIMIT_ENV: "1M"})
    try:
        url = f"http://127.0.0.1:{server.getsockname()[1]}/models/model.onnx"
        path = fetch(url, hashlib.sha256(body).hexdigest(), "models.m.model_file_path", work / "deploy.yml",
                     work / "downloads")
        if path.read_bytes() != body:
            raise AssertionError("fetch kept a file that is not the one asked for")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.close()
        thread.join(10)


# name -> (seed file in the corpus, target)
TARGETS = {
    "deployment": ("deploy.yml", _deployment),
    "onnx": ("model.onnx", _onnx),
    "tensorflow": ("graph.pb", _tensorflow),
    "caffe": ("net.prototxt", _caffe),
    "ir": ("model.pb", _ir),
    "npy": ("input.npy", _npy),
    "tflite": ("model_int8.tflite", _tflite),
    "png": ("image.png", _image("image.png")),
    "jpeg": ("image.jpg", _image("image.jpg")),
    "image_preprocess": ("image_preprocess.yml", _image_preprocess),
    "ray_address": ("ray_address.txt", _ray_address),
    "accuracy_script": ("accuracy.py", _accuracy_script),
    "manifest": ("manifest.json", _manifest),
    "shard": ("shard.npz", _shard),
    "sweep": ("sweep_args.txt", _sweep),
    "url": ("http_response.txt", _url),
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

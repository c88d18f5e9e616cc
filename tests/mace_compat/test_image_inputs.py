"""Images as inputs through the real CLI, on the digits example: the held-out digits written as 8x8
gray PNG files, declared once with `image_preprocess` (GRAY, (x - 127.5) / 127.5), then used by
run --validate (validation_inputs_data and --input_dir), by convert's calibration (a folder and a
list of PNG files) and by an accuracy_validation_script that hands back file names. Every result is
compared with the same run fed the hand-decoded .npy arrays."""
from __future__ import annotations

import json
import os
import textwrap

import numpy as np
import pytest

from tests.cli_helpers import DIGITS, cli, digits_model, workdir, write_deployment

Image = pytest.importorskip("PIL.Image", reason="Pillow decodes the images (the images extra)")
PREP = {"channel_order": "GRAY", "mean": 127.5, "std": 127.5}
COUNT = 24


def ok(r):
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    assert "Traceback" not in r.stderr
    return r


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """digits/ + png/<i>.png (the first COUNT test digits) + npy/<i>/image.npy (their hand decoding)."""
    w = workdir(tmp_path_factory.mktemp("images"))
    with np.load(DIGITS / "test_set.npz") as z:
        digits, labels = z["images"][:COUNT], z["labels"][:COUNT]
    for d in ("png", "npy"):
        (w / d).mkdir()
    for i, x in enumerate(digits):
        pixels = np.rint((x[0] + 1) * 127.5).astype(np.uint8)     # 8x8, 0..255
        Image.fromarray(pixels, mode="L").save(w / "png" / f"{i:02d}.png")
        (w / "npy" / f"{i:02d}").mkdir()
        np.save(w / "npy" / f"{i:02d}" / "image.npy", ((pixels - 127.5) / 127.5).astype(np.float32)[None, :, :, None])
    np.save(w / "labels.npy", labels)
    return w


def _deploy(work, name="deploy.yml", library="digits", **keys):
    write_deployment(work / name, {"digits_cnn": digits_model(**keys)}, library=library)
    return name


def _outputs(work, config, *flags):
    ok(cli("run", f"--config={config}", "--output_dir=out", *flags, cwd=work))
    return np.load(work / "out" / "prob.npy")


def test_run_validate_on_an_image_equals_its_hand_decoding(work):
    config = _deploy(work, validation_inputs_data=["png/03.png"], image_preprocess=PREP)
    ok(cli("convert", f"--config={config}", cwd=work))
    r = ok(cli("run", f"--config={config}", "--validate", cwd=work))
    assert "Similarity test passed" in r.stdout
    from_image = _outputs(work, config)
    from_npy = _outputs(work, config, "--input_dir=npy/03")
    assert np.array_equal(from_image, from_npy) and from_image.argmax() == np.load(work / "labels.npy")[3]
    (work / "one").mkdir(exist_ok=True)
    (work / "one" / "image.png").write_bytes((work / "png" / "03.png").read_bytes())
    assert np.array_equal(_outputs(work, config, "--input_dir=one"), from_npy)   # --input_dir/<name>.png


def test_calibration_from_a_folder_or_list_of_images_equals_npy_samples(work):
    """quantize: 1 calibrated on PNG files gives the same weights and ranges as on their .npy decoding."""
    data = {}
    for lib, cal in (("from_png", "png"), ("from_list", [f"png/{i:02d}.png" for i in range(COUNT)]),
                     ("from_npy", "npy")):
        config = _deploy(work, f"{lib}.yml", lib, quantize=1, quantize_calibration_data=cal,
                         validation_inputs_data=["png/05.png"], image_preprocess=PREP)
        ok(cli("convert", f"--config={config}", cwd=work))
        if lib == "from_png":
            r = ok(cli("run", f"--config={config}", "--validate", cwd=work))
            assert "Similarity test passed" in r.stdout
        data[lib] = (work / "builds" / lib / "model" / "digits_cnn.data").read_bytes()
        pb = (work / "builds" / lib / "model" / "digits_cnn.pb_txt").read_text()
        assert "quantize" in pb.lower()
    assert data["from_png"] == data["from_npy"] == data["from_list"]


VALIDATOR = textwrap.dedent('''
    import os
    import numpy as np

    HERE = os.path.dirname(os.path.abspath(__file__))

    class AccuracyValidator(object):
        def __init__(self, **kwargs):
            self._labels = np.load(os.path.join(HERE, "labels.npy"))
            self._correct = 0

        def sample_size(self):
            return len(self._labels)

        def batch_size(self):
            return 1

        def preprocess(self, start, end, **kwargs):
            if os.environ["FEED"] == "png":      # file names: decoded as image_preprocess says
                return {"image": [os.path.join(HERE, "png", "%02d.png" % i) for i in range(start, end)]}
            return {"image": [np.load(os.path.join(HERE, "npy", "%02d" % i, "image.npy")) for i in range(start, end)]}

        def postprocess(self, start, end, output_map, **kwargs):
            self._correct += int((np.asarray(output_map["prob"]).reshape(end - start, -1).argmax(-1)
                                  == self._labels[start:end]).sum())

        def result(self):
            return {"correct": self._correct, "samples": len(self._labels)}
''')


def test_accuracy_script_may_hand_back_image_files(work):
    (work / "validator.py").write_text(VALIDATOR)
    config = _deploy(work, "acc.yml", "acc", image_preprocess=PREP, accuracy_validation_script="validator.py")
    ok(cli("convert", f"--config={config}", cwd=work))
    results = {}
    for feed in ("png", "npy"):
        ok(cli("run", f"--config={config}", cwd=work, env={**os.environ, "FEED": feed}))
        saved = json.loads((work / "builds" / "acc" / "digits_cnn_accuracy.json").read_text())
        results[feed] = saved["result"]
    assert results["png"] == results["npy"] and results["png"]["samples"] == COUNT
    assert results["png"]["correct"] >= COUNT * 0.8   # a trained model: most digits right


def test_image_without_image_preprocess_is_one_clear_error(work):
    config = _deploy(work, "plain.yml", validation_inputs_data=["png/03.png"])   # the float build of `digits`
    r = cli("run", f"--config={config}", cwd=work)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "03.png is an image, but input 'image' declares no image_preprocess" in r.stderr


def test_image_preprocess_for_an_unknown_input_is_a_config_error(work):
    config = _deploy(work, "typo.yml", image_preprocess={"imgae": PREP})
    r = cli("config", f"--config={config}", cwd=work)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "image_preprocess: no input named 'imgae'" in r.stderr


def test_quantize_stat_over_a_folder_of_images_equals_npy_samples(work):
    config = _deploy(work, "stat.yml", "stat", image_preprocess=PREP)
    ok(cli("convert", f"--config={config}", "--quantize_stat", cwd=work))
    logs = {}
    for folder in ("png", "npy"):
        r = ok(cli("run", f"--config={config}", "--quantize_stat", f"--input_dir={folder}", cwd=work))
        assert f"over {COUNT} sample(s)" in r.stdout
        logs[folder] = (work / "builds" / "stat" / "quantize_stat" / "digits_cnn_tensor_range.log").read_text()
    assert logs["png"] == logs["npy"] and logs["png"].count("Tensor range @@") >= COUNT


def test_vlog_level_1_says_how_each_image_was_read(work):
    """Issue 38: which decoder read the file, its mode and size, and what was done to it (a 16-bit
    PNG scaled, an EXIF orientation applied) were nowhere to be seen."""
    deep = (np.arange(64, dtype=np.uint16).reshape(8, 8) * 1040)
    exif = Image.Exif()
    exif[0x0112] = 6   # "rotate 90 clockwise to display"
    Image.fromarray(deep).save(work / "png" / "deep.png", exif=exif.tobytes())
    config = _deploy(work, "deep.yml", validation_inputs_data=["png/deep.png"], image_preprocess=PREP)
    ok(cli("convert", f"--config={config}", cwd=work))
    r = ok(cli("run", f"--config={config}", "--vlog_level=1", cwd=work))
    line = next((x for x in r.stderr.splitlines() if "png/deep.png: PNG I" in x), None)
    assert line, r.stderr
    assert "8x8 (16-bit, scaled by 1/257; EXIF orientation 6 applied) for input 'image'" in line
    assert "deep.png" not in ok(cli("run", f"--config={config}", cwd=work)).stderr   # quiet by default

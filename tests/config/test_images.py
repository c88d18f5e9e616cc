"""Images as inputs (mace/config/images.py): the `image_preprocess` key and the decoding it declares,
checked against the same steps written out in numpy on a real photograph (scikit-learn's china.jpg,
427x640). Pillow decodes in both; everything after decoding is computed by hand here."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from mace.config.images import ALL_INPUTS, decode, for_input, image_input, parse_image_preprocess
from mace.config.specs import TensorSpec
from mace.errors import ConfigError, RuntimeInputError
from mace.util.invocation import install_hint

Image = pytest.importorskip("PIL.Image", reason="Pillow decodes the images (the images extra)")
sklearn = pytest.importorskip("sklearn", reason="scikit-learn ships the sample photograph")
CHINA = Path(sklearn.__file__).parent / "datasets" / "images" / "china.jpg"


def _spec(shape, fmt="NHWC", dtype="float32", **prep):
    table = parse_image_preprocess(prep or {"channel_order": "RGB"})
    return TensorSpec("data", tuple(shape), fmt, dtype, (-1.0, 1.0), for_input(table, "data"))


def _pixels():
    with Image.open(CHINA) as im:
        return np.asarray(im.convert("RGB"), np.float32)


def test_photograph_is_what_the_tests_assume():
    assert _pixels().shape == (427, 640, 3)


def test_caffe_style_bgr_mean_scale_nchw_center_crop_by_hand():
    # resize 427 = the shorter side already: no resampling, so every step is hand-computed
    spec = _spec((1, 3, 224, 224), "NCHW", resize=427, channel_order="BGR", mean=[104, 117, 123],
                 scale=0.017)
    got = image_input(CHINA, spec, spec.image, "test")
    top, left = (427 - 224) // 2, (640 - 224) // 2
    crop = _pixels()[top:top + 224, left:left + 224, ::-1]          # BGR
    want = ((crop - np.array([104, 117, 123], np.float32)) * np.float32(0.017)).transpose(2, 0, 1)[None]
    assert got.shape == (1, 3, 224, 224) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


def test_torchvision_style_resize_shorter_side_then_crop_nhwc():
    mean, std = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]
    spec = _spec((1, 224, 224, 3), "NHWC", resize=256, mean=mean, std=std)
    got = image_input(CHINA, spec, spec.image, "test")
    with Image.open(CHINA) as im:   # the resampling is Pillow's in both; 640 * 256 / 427 = 383.7 -> 384
        small = np.asarray(im.convert("RGB").resize((384, 256), Image.Resampling.BILINEAR), np.float32)
    top, left = (256 - 224) // 2, (384 - 224) // 2
    want = (small[top:top + 224, left:left + 224] - np.float32(mean)) / np.float32(std)
    np.testing.assert_allclose(got[0], want, rtol=0, atol=1e-5)


def test_exact_resize_gray_uint8_no_batch_dim():
    spec = _spec((32, 48, 1), "NHWC", "uint8", channel_order="GRAY")
    got = decode(CHINA, spec, spec.image, "test")
    with Image.open(CHINA) as im:
        want = np.asarray(im.convert("L").resize((48, 32), Image.Resampling.BILINEAR))
    assert got.dtype == np.uint8 and np.array_equal(got[..., 0], want)


def test_png_round_trip_is_exact(tmp_path):
    rng = np.random.default_rng(3)
    pixels = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "x.png")
    spec = _spec((1, 3, 6, 5), "NCHW", mean=127.5, std=127.5)
    got = image_input(tmp_path / "x.png", spec, spec.image, "test")
    np.testing.assert_allclose(got[0], ((pixels - 127.5) / 127.5).transpose(2, 0, 1), atol=1e-6)


def test_one_mapping_applies_to_every_input_names_pick_one():
    assert set(parse_image_preprocess({"mean": 1})) == {ALL_INPUTS}
    table = parse_image_preprocess({"a": {"channel_order": "bgr"}, "b": {"std": 2}})
    assert for_input(table, "a").channel_order == "BGR" and for_input(table, "c") is None


@pytest.mark.parametrize("raw, words", [
    ({"mean": [1, 2]}, "mean: 2 values for 3 channel(s)"),
    ({"channel_order": "RGBA"}, "channel_order"),
    ({"resize": "0"}, "resize"),
    ({"std": 0}, "positive"),
    ({"resize": 100000}, "resize: 100000 is more than 16384 pixels a side"),
    ({"resize": 2147483648}, "more than 16384 pixels a side"),
    ({"resize": "8,99999"}, "more than 16384"),
    ({"std": -1}, "std and scale must be positive"),
    ({"scale": -0.5}, "std and scale must be positive"),
    ({"mean": 1e308}, "not finite, distinct values"),
    ({"scale": 1e308}, "not finite, distinct values"),
    ({"std": 1e-45}, "not finite, distinct values"),
    ({"scale": 1e-45}, "not finite, distinct values"),
    ({"mean": float("inf")}, "expected finite numbers"),
    ({"data": {"crop": 3}}, "unknown key(s) crop"),
    ({"layout": "CHW"}, "layout"),
    ("yes", "expected a mapping"),
])
def test_bad_declarations_name_the_key(raw, words):
    with pytest.raises(ValueError, match=None) as e:
        parse_image_preprocess(raw)
    assert words in str(e.value)


def test_shape_that_cannot_take_the_image_is_refused():
    spec = _spec((1, 224, 224, 3), "NHWC", channel_order="GRAY")
    with pytest.raises(ConfigError, match="has 3 channel"):
        decode(CHINA, spec, spec.image, "k")
    spec = _spec((1, 150528), "NONE")
    with pytest.raises(ConfigError, match="layout: NHWC"):
        decode(CHINA, spec, spec.image, "k")


def test_too_small_after_resize_and_batch_above_one(tmp_path):
    spec = _spec((1, 224, 224, 3), resize=100)
    with pytest.raises(RuntimeInputError, match="smaller than input 'data'"):
        decode(CHINA, spec, spec.image, "k")
    spec = _spec((2, 224, 224, 3))
    with pytest.raises(RuntimeInputError, match="batch of 2"):
        image_input(CHINA, spec, spec.image, "k")


def test_broken_and_missing_files_name_the_file(tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not a jpeg")
    spec = _spec((1, 8, 8, 3))
    with pytest.raises(RuntimeInputError, match="bad.jpg is not a readable JPEG/PNG"):
        decode(bad, spec, spec.image, "k")
    with pytest.raises(RuntimeInputError, match="nope.png for input 'data' not found"):
        decode(tmp_path / "nope.png", spec, spec.image, "k")


def test_missing_pillow_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)   # import PIL now raises ImportError
    spec = _spec((1, 8, 8, 3))
    with pytest.raises(ConfigError, match=re.escape(install_hint("images"))):
        decode(CHINA, spec, spec.image, "k")


def test_pillow_decompression_bomb_guard_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)   # china.jpg has 273,280 pixels
    spec = _spec((1, 8, 8, 3))
    with pytest.raises(RuntimeInputError, match="china.jpg is refused"):
        decode(CHINA, spec, spec.image, "k")


EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 8 8\n0 0 moveto 8 8 lineto stroke\nshowpage\n%%EOF\n"


def test_eps_under_a_png_name_never_reaches_ghostscript(tmp_path, monkeypatch):
    # issue 38, security item 3: Pillow hands EPS (and PDF) to Ghostscript wherever it is installed
    import PIL.EpsImagePlugin as eps

    called = []
    monkeypatch.setattr(eps, "Ghostscript", lambda *a, **k: called.append(a) or Image.new("RGB", (8, 8)))
    monkeypatch.setattr(eps, "has_ghostscript", lambda: True)
    (tmp_path / "image.png").write_bytes(EPS)
    spec = _spec((1, 8, 8, 3))
    with pytest.raises(RuntimeInputError, match=r"image.png is not a readable JPEG/PNG image .*PostScript/EPS"):
        decode(tmp_path / "image.png", spec, spec.image, "k")
    assert called == []


@pytest.mark.parametrize("fmt, named", [("BMP", "BMP"), ("GIF", "GIF"), ("TIFF", "TIFF"), ("ICO", "ICO")])
def test_other_formats_under_image_names_are_refused_naming_them(tmp_path, fmt, named):
    path = tmp_path / "photo.jpg"
    Image.new("RGB", (16, 16), (200, 10, 10)).save(path, format=fmt)
    spec = _spec((1, 16, 16, 3))
    with pytest.raises(RuntimeInputError, match=f"photo.jpg is not a readable JPEG/PNG image .*{named}"):
        decode(path, spec, spec.image, "k")
    # the same pixels as a PNG under a .jpg name: read by content
    Image.new("RGB", (16, 16), (200, 10, 10)).save(path, format="PNG")
    assert decode(path, spec, spec.image, "k")[0, 0].tolist() == pytest.approx(
        ((np.float32([200, 10, 10]) - np.float32(spec.image.mean)) / np.float32(spec.image.std)
         * np.float32(spec.image.scale)).tolist())


def _png(path, array, **save):
    Image.fromarray(array).save(path, **save)
    return path


def test_resize_past_the_pixel_bound_is_refused_before_allocating(tmp_path):
    """Issue 38: `resize: N` scales the shorter side: of a 1-pixel-high strip, 16384 makes
    16384 x 2^21 pixels (the old 100000 on an 8x8 image, 10^10); refused naming the file."""
    strip = _png(tmp_path / "strip.png", np.zeros((1, 128, 3), np.uint8))
    spec = _spec((1, 8, 8, 3), resize=16384)
    with pytest.raises(RuntimeInputError, match=r"strip.png is 128x1; resize \[16384\] would make it "
                                                r"2097152x16384, more than 268435456 pixels"):
        decode(strip, spec, spec.image, "k")


def test_exif_orientation_is_applied(tmp_path):
    """Issue 38: the tensor is the photo as shown, not the pixels as stored sideways."""
    stored = np.zeros((2, 4, 3), np.uint8)
    stored[0, 0] = 255                       # top-left, stored
    exif = Image.Exif()
    exif[0x0112] = 6                         # "rotate 90 clockwise to display"
    path = _png(tmp_path / "sideways.png", stored, exif=exif.tobytes())
    spec = _spec((1, 4, 2, 3), channel_order="RGB")
    got = decode(path, spec, spec.image, "k")
    assert got.shape == (4, 2, 3)
    np.testing.assert_array_equal(got[..., 0], np.rot90(stored[..., 0], -1).astype(np.float32))


@pytest.mark.parametrize("order", ["GRAY", "RGB"])
def test_16_bit_png_is_scaled_not_clipped(tmp_path, order):
    """Issue 38: Pillow's convert() clipped a 16-bit PNG to 0..255 (two values left); 65535 is 255."""
    deep = (np.arange(64, dtype=np.uint16).reshape(8, 8) * 1040)
    path = _png(tmp_path / "deep.png", deep)
    assert Image.open(path).mode.startswith("I")
    channels = 1 if order == "GRAY" else 3
    spec = _spec((1, 8, 8, channels), channel_order=order)
    got = decode(path, spec, spec.image, "k")
    want = np.repeat((deep / 257.0).astype(np.float32)[..., None], channels, axis=-1)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert len(np.unique(got)) == 64


def test_image_preprocess_nonsense_through_the_cli(tmp_path):
    from tests.cli_helpers import cli, digits_model, workdir, write_deployment
    work = workdir(tmp_path)
    for bad, words in (({"resize": 2147483648}, "more than 16384 pixels a side"),
                       ({"mean": 1e308}, "not finite, distinct values"),
                       ({"std": -58.0}, "std and scale must be positive")):
        write_deployment(work / "bad.yml", {"digits_cnn": digits_model(image_preprocess=bad)})
        r = cli("config", "--config=bad.yml", cwd=work, timeout=60)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert "models.digits_cnn.image_preprocess" in r.stderr and words in r.stderr, r.stderr

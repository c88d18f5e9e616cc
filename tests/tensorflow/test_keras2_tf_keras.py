"""A Keras 2 `.h5` that Keras 3 cannot deserialize is read by tf_keras (issue 34, item 2).

tf_keras (Keras 2 on TF 2.16+) writes `trainable` into every layer config; Keras 3's
SpatialDropout1D takes no such argument and refuses the file ("unexpected keyword argument
'trainable'"). The file here is written by tf_keras itself, converted and validated through the
CLI (the reference reads it the same way), and the converted model must compute what the
tf_keras model computes.
"""
import numpy as np
import pytest

from tests.cli_helpers import cli, sha256, write_deployment

tf_keras = pytest.importorskip("tf_keras", reason="Keras 2 files need tf_keras (the tf extra)")
keras = pytest.importorskip("keras")


@pytest.fixture(scope="module")
def keras2_h5(tmp_path_factory):
    L = tf_keras.layers
    tf_keras.utils.set_random_seed(3)
    inp = tf_keras.Input((16, 8), name="feats")
    x = L.Conv1D(6, 3, padding="same", activation="relu")(inp)
    x = L.SpatialDropout1D(0.2)(x)
    x = L.BatchNormalization()(x)
    x = L.GlobalAveragePooling1D()(x)
    model = tf_keras.Model(inp, L.Dense(3, activation="softmax")(x))
    bn = model.layers[3]   # statistics that are not the initial ones: the weights must be loaded
    bn.moving_mean.assign(np.linspace(-0.2, 0.2, 6).astype(np.float32))
    bn.moving_variance.assign(np.linspace(0.5, 1.5, 6).astype(np.float32))
    path = tmp_path_factory.mktemp("keras2") / "spatial_dropout.h5"
    model.save(str(path))
    return model, path


def test_keras3_refuses_the_file(keras2_h5):
    with pytest.raises(Exception, match="unexpected keyword argument 'trainable'"):
        keras.models.load_model(str(keras2_h5[1]), compile=False)


def test_convert_and_validate_through_tf_keras(keras2_h5, tmp_path):
    from mace.runtime import create_engine

    model, path = keras2_h5
    sg = {"input_tensors": "feats", "input_shapes": "1,16,8", "input_data_formats": "NONE",
          "input_ranges": "-1,1", "output_tensors": "Identity", "output_shapes": "1,3",
          "output_data_formats": "NONE"}
    entry = {"platform": "keras", "model_file_path": str(path), "model_sha256_checksum": sha256(path),
             "runtime": "cpu", "subgraphs": [sg]}
    yml = write_deployment(tmp_path / "deploy.yml", {"k2": entry}, library="k2")
    r = cli("convert", "--config", yml, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    out = " ".join(r.stdout.split())
    assert f"note: k2: spatial_dropout.h5: read by tf_keras {tf_keras.__version__} (Keras 2)" in out
    assert "unexpected keyword argument 'trainable'" in out   # why Keras 3 did not
    r = cli("run", "--config", yml, "--validate", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Similarity test passed" in r.stdout

    engine = create_engine(str(tmp_path / "builds" / "k2" / "model" / "k2.pb"))
    x = np.random.default_rng(5).uniform(-1, 1, (1, 16, 8)).astype(np.float32)
    got = engine.run({"feats": x})["Identity"]
    np.testing.assert_allclose(got, model(x, training=False).numpy(), rtol=1e-5, atol=1e-6)


def test_a_file_neither_loader_reads_names_both(tmp_path):
    from mace.errors import ModelError
    from mace.frontends.tensorflow.loader import load_graph_def

    path = tmp_path / "broken.h5"
    path.write_bytes(b"not an HDF5 file")
    with pytest.raises(ModelError, match=r"broken.h5: Keras cannot load this file .*tf_keras .* cannot either"):
        load_graph_def(path)


@pytest.fixture(scope="module", params=[False, True], ids=["last_step", "return_sequences"])
def keras2_lstm_h5(request, tmp_path_factory):
    """A name classifier as ethnicolr ships them (Keras 2 .h5: Embedding -> LSTM -> Dense, float
    ids in): Keras 3 refuses its LSTM's `time_major`; frozen, the LSTM's tf.while_loop keeps its
    steps in TF2 TensorLists (FromTensor, Reserve, GetItem, SetItem, Stack)."""
    L = tf_keras.layers
    tf_keras.utils.set_random_seed(7)
    model = tf_keras.Sequential([tf_keras.Input((12,), name="ids"), L.Embedding(40, 8),
                                 L.LSTM(6, return_sequences=request.param), L.Dense(4, activation="softmax")])
    path = tmp_path_factory.mktemp("keras2_lstm") / "lstm.h5"
    model.save(str(path))
    return model, path


def test_keras2_lstm_converts_through_tf_keras_with_its_tensor_lists(keras2_lstm_h5, tmp_path):
    from mace.config.specs import ModelSpec, TensorSpec
    from mace.frontends import convert
    from mace.frontends.tensorflow.loader import load_model_file
    from mace.runtime.engine import Engine
    from mace.transform.pipeline import transform

    model, path = keras2_lstm_h5
    with pytest.raises(Exception, match="time_major"):
        keras.models.load_model(str(path), compile=False)
    loaded = load_model_file(path)
    assert "read by tf_keras" in loaded.note and "time_major" in loaded.note
    assert {"TensorListFromTensor", "TensorListStack"} <= {n.op for n in loaded.graph_def.node}
    graph = convert("tensorflow", ModelSpec(path, [TensorSpec("ids", (2, 12), "NONE")],
                                            [TensorSpec("Identity", None, "NONE")]))
    transform(graph, {"runtime": "cpu"})
    x = np.random.default_rng(2).integers(0, 40, (2, 12)).astype(np.float32)
    x[0, :5] = 0   # pad_sequences' leading zeros
    got = Engine(graph).run({"ids": x})["Identity"]
    np.testing.assert_allclose(got, model(x, training=False).numpy(), rtol=1e-5, atol=1e-6)

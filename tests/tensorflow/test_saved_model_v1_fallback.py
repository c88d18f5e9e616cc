"""A SavedModel whose Python objects TensorFlow cannot revive is read as TF1 reads it.

basic-pitch's SavedModel (a Keras 2 export with optimizer state) fails in
`tf.saved_model.load` with "'_UserObject' object has no attribute 'add_slot'"; its serving
graph needs none of those objects. The loader then reads the serving MetaGraph and its
variables by name, and names the frozen graph as it names a TF2 signature's (argument names
for placeholders, Identity, Identity_1, ... for the outputs in sorted key order). Here the
failure is forced on a small Keras export and the frozen graph is checked against Keras.
"""
import numpy as np
import pytest

from mace.errors import ModelError
from tests.tensorflow.keras_nets import L, keras

tf = pytest.importorskip("tensorflow", reason="the TensorFlow frontend needs TensorFlow")


def two_output_model():
    keras.utils.set_random_seed(3)
    inp = keras.Input((16, 16, 3), name="image")
    x = L.Conv2D(6, 3, padding="same", activation="relu")(inp)
    x = L.BatchNormalization()(x)
    pooled = L.GlobalAveragePooling2D()(x)
    return keras.Model(inp, [L.Dense(4, activation="softmax")(pooled), L.Dense(2)(pooled)])


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    path = tmp_path_factory.mktemp("sm") / "two_outputs"
    model = two_output_model()
    model.export(str(path), verbose=False)
    return model, path


def _revive_fails(*args, **kwargs):
    raise AttributeError("'_UserObject' object has no attribute 'add_slot'")


def test_fallback_freezes_the_serving_graph(exported, monkeypatch):
    from mace.frontends.tensorflow import loader

    model, path = exported
    monkeypatch.setattr(tf.saved_model, "load", _revive_fails)
    graph_def = loader._freeze_saved_model(path)
    placeholders = [n.name for n in graph_def.node if n.op == "Placeholder"]
    assert placeholders == ["image"]  # the signature's argument name, not serving_default_image
    x = np.random.default_rng(0).uniform(-1, 1, (2, 16, 16, 3)).astype(np.float32)
    graph = tf.Graph()
    with graph.as_default():
        tf.import_graph_def(graph_def, name="")
    with tf.compat.v1.Session(graph=graph) as sess:
        got = sess.run(["Identity:0", "Identity_1:0"], {"image:0": x})
    want = model(x, training=False)  # output_0, output_1: sorted keys = model order here
    np.testing.assert_allclose(got[0], want[0].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], want[1].numpy(), rtol=1e-5, atol=1e-5)


def test_when_both_loaders_fail_the_first_error_is_reported(tmp_path, monkeypatch):
    from mace.frontends.tensorflow import loader

    (tmp_path / "saved_model.pb").write_bytes(b"not a SavedModel")
    monkeypatch.setattr(tf.saved_model, "load", _revive_fails)
    with pytest.raises(ModelError, match="cannot load this SavedModel .*add_slot"):
        loader._freeze_saved_model(tmp_path)

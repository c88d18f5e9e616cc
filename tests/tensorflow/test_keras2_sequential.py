"""A Sequential .h5 written by Keras before 2.2.3 converts (oarriaga's face_classification
gender model, shipped by ybc-face-emotion, is one).

Those files list the layers directly as `model_config.config`, the first layer carrying
`batch_input_shape`; Keras 3 refuses them ("pop expected at most 1 argument, got 2"). The
file here is written in that old form from a model with known weights, and the converted
model must compute what that model computes.
"""
import json

import numpy as np
import pytest

from mace.errors import ModelError
from tests.tensorflow.keras_nets import L, keras

h5py = pytest.importorskip("h5py", reason="Keras .h5 files need h5py")


def old_style_sequential(path):
    keras.utils.set_random_seed(7)
    model = keras.Sequential([keras.Input((12, 12, 3)), L.Conv2D(4, 3, padding="same", name="image_array"),
                              L.BatchNormalization(), L.Activation("relu"), L.GlobalAveragePooling2D(),
                              L.Activation("softmax", name="predictions")])
    # moving statistics that are not the initial ones, so the weights must really be loaded
    bn = model.layers[1]
    bn.moving_mean.assign(np.linspace(-0.3, 0.3, 4).astype(np.float32))
    bn.moving_variance.assign(np.linspace(0.5, 2.0, 4).astype(np.float32))
    model.save(path)
    with h5py.File(path, "r+") as f:  # rewrite the config as Keras 2.0 wrote it
        config = json.loads(f.attrs["model_config"])
        layers = [entry for entry in config["config"]["layers"] if entry["class_name"] != "InputLayer"]
        layers[0]["config"]["batch_input_shape"] = [None, 12, 12, 3]
        f.attrs["model_config"] = json.dumps({"class_name": "Sequential", "config": layers})
    return model


def test_keras2_sequential_h5_loads_with_its_weights(tmp_path):
    from mace.frontends.tensorflow.loader import import_tf, load_graph_def

    tf = import_tf()
    path = tmp_path / "old.h5"
    model = old_style_sequential(path)
    with pytest.raises(Exception, match="pop expected"):  # what Keras itself says about the file
        keras.models.load_model(str(path), compile=False)
    graph_def = load_graph_def(path)
    assert [n.name for n in graph_def.node if n.op == "Placeholder"] == ["image_array_input"]
    x = np.random.default_rng(1).uniform(-1, 1, (2, 12, 12, 3)).astype(np.float32)
    graph = tf.Graph()
    with graph.as_default():
        tf.import_graph_def(graph_def, name="")
    with tf.compat.v1.Session(graph=graph) as sess:
        got = sess.run("Identity:0", {"image_array_input:0": x})
    np.testing.assert_allclose(got, model(x, training=False).numpy(), rtol=1e-5, atol=1e-6)


def test_a_file_keras_cannot_read_is_still_a_clear_error(tmp_path):
    from mace.frontends.tensorflow.loader import load_graph_def

    path = tmp_path / "broken.h5"
    path.write_bytes(b"not an HDF5 file")
    with pytest.raises(ModelError, match="broken.h5: Keras cannot load this file"):
        load_graph_def(path)


@pytest.mark.parametrize("config", ["null", "[1, 2]", '{"class_name": "Sequential", "config": [7]}',
                                    '{"class_name": "Sequential", "config": [{"config": null}]}'])
def test_a_model_config_of_the_wrong_shape_is_a_clear_error(tmp_path, config):
    """Issue 38: `model_config` null or a list was an internal error (AttributeError) once Keras
    itself had refused the file."""
    from mace.frontends.tensorflow.loader import load_graph_def

    path = tmp_path / "odd.h5"
    old_style_sequential(path)
    with h5py.File(path, "r+") as f:
        f.attrs["model_config"] = config
    with pytest.raises(ModelError, match="odd.h5: Keras cannot load this file"):
        load_graph_def(path)

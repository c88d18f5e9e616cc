"""Read a TensorFlow model as a frozen GraphDef, the form MACE converts.

Accepted: a frozen GraphDef `.pb` (binary; `.pbtxt` as text), a Keras model file
(`.h5`, `.hdf5`, `.keras`) or a SavedModel directory. Keras models and
SavedModels are frozen here (variables become constants through
convert_variables_to_constants_v2 on a concrete function; a SavedModel whose
Python objects cannot be revived, through TF1's loader), so the converter and
the validation reference see the very same graph. TensorFlow is imported only
by the functions that need it: it takes seconds.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path

from mace.errors import ModelError
from mace.util.invocation import install_hint

KERAS_SUFFIXES = (".h5", ".hdf5", ".keras")


def import_tf():
    """The tensorflow module, with its C++ log chatter turned down and oneDNN's reordered
    arithmetic off (a reference should not vary with the CPU), unless the user set them."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    _keep_symbols_local()
    try:
        import tensorflow as tf
    except ImportError:
        raise ModelError(f"platform 'tensorflow' needs TensorFlow: {install_hint('tf')} "
                         "(installs tensorflow-cpu)") from None
    return tf


def _keep_symbols_local() -> None:
    """Load TensorFlow's core library without RTLD_GLOBAL.

    The pip build loads it through pywrap_dlopen_global_flags with RTLD_GLOBAL, which
    exports the LLVM it bundles to every library loaded later: PoCL (the GPU runtime's
    OpenCL) then binds to TensorFlow's LLVM and crashes or cannot compile. The flag is for
    custom-op libraries, which a frozen graph cannot use here; the stub makes the load local.
    """
    name = "tensorflow.python.pywrap_dlopen_global_flags"
    if "tensorflow" in sys.modules or name in sys.modules:
        return  # too late, or done already
    stub = types.ModuleType(name, "pymace: TensorFlow's core library loads RTLD_LOCAL")
    stub.set_dlopen_flags = stub.reset_dlopen_flags = lambda: None
    sys.modules[name] = stub


def tensor_name(name: str) -> str:
    """Canonical TensorFlow tensor name: 'node' -> 'node:0'; 'node:1' stays."""
    node, sep, index = name.rpartition(":")
    return name if sep and index.isdigit() else f"{name}:0"


def split_tensor(name: str) -> tuple:
    """('node', output index) of a tensor name written with or without ':N'."""
    node, _, index = tensor_name(name).rpartition(":")
    return node, int(index)


@dataclass(frozen=True)
class LoadedModel:
    graph_def: object    # the frozen tf.compat.v1.GraphDef; callers must not modify it
    note: str = ""       # how the file was read, when the user should hear it (tf_keras's fallback)


def load_graph_def(path):
    """The frozen GraphDef of the model at `path` (a ModelError names what is wrong)."""
    return load_model_file(path).graph_def


def load_model_file(path) -> LoadedModel:
    """The frozen GraphDef of the model at `path` and a note on how it was read."""
    path = Path(path)
    if not path.exists():
        raise ModelError(f"{path}: model file not found")
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    stamp = tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files)
    return _load_cached(str(path.resolve()), stamp)


@functools.lru_cache(maxsize=4)
def _load_cached(path: str, stamp: tuple) -> LoadedModel:
    # Keyed on every file's modification time and size, so a rewritten model is read again.
    path = Path(path)
    if path.is_dir():
        return LoadedModel(_freeze_saved_model(path))
    if path.suffix.lower() in KERAS_SUFFIXES:
        return _freeze_keras(path)
    return LoadedModel(_read_graph_def(path))


def _read_graph_def(path: Path):
    tf = import_tf()
    graph_def = tf.compat.v1.GraphDef()
    data = path.read_bytes()
    try:
        if path.suffix.lower() == ".pbtxt":
            from google.protobuf import text_format
            text_format.Parse(data.decode("utf-8"), graph_def)
        else:
            graph_def.ParseFromString(data)
    except Exception as e:
        raise ModelError(f"{path}: not a TensorFlow GraphDef ({type(e).__name__}: {e}); "
                         f"platform 'tensorflow' takes a frozen .pb, a Keras .h5/.keras file "
                         f"or a SavedModel directory") from None
    if not graph_def.node:
        raise ModelError(f"{path}: the GraphDef has no nodes (is it a frozen TensorFlow graph?)")
    return graph_def


def _freeze(concrete, path: Path):
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    try:
        frozen = convert_variables_to_constants_v2(concrete)
    except Exception as e:
        raise ModelError(f"{path}: cannot freeze the model's variables into constants "
                         f"({type(e).__name__}: {e})") from None
    return frozen.graph.as_graph_def()


def _freeze_keras(path: Path) -> LoadedModel:
    tf = import_tf()
    model, note = _load_keras(path)
    try:
        inputs = list(model.inputs)
    except (AttributeError, ValueError):
        inputs = []
    if not inputs:
        raise ModelError(f"{path}: the Keras model has no defined inputs (build it with keras.Input)")
    # Each placeholder is named after its Keras input, so input_tensors can name it.
    specs = [tf.TensorSpec(t.shape, t.dtype, name=t.name.split(":")[0]) for t in inputs]
    fn = tf.function(lambda *xs: model(list(xs) if len(xs) > 1 else xs[0], training=False))
    return LoadedModel(_freeze(fn.get_concrete_function(*specs), path), note)


def _load_keras(path: Path):
    """(model, note): Keras 3 first; a Keras 2 file it cannot deserialize (a layer config with
    arguments Keras 3 dropped, e.g. SpatialDropout1D's `trainable`: "unexpected keyword
    argument") is read by tf_keras, Keras 2 on TF 2.16+, and the note says so."""
    import keras

    try:
        return keras.models.load_model(str(path), compile=False), ""
    except Exception as e:
        error = e
    try:
        return _load_keras2_sequential(keras, path, error), ""
    except ModelError as e:
        refused = e
    if importlib.util.find_spec("tf_keras") is None:
        raise ModelError(f"{refused}; if Keras 2 wrote it, tf_keras may read it: "
                         f"{install_hint('keras2')}") from None
    import tf_keras

    try:
        model = tf_keras.models.load_model(str(path), compile=False)
    except Exception as e:
        raise ModelError(f"{refused}; tf_keras {tf_keras.__version__} cannot either "
                         f"({type(e).__name__}: {_first_line(e)})") from None
    return model, (f"read by tf_keras {tf_keras.__version__} (Keras 2): Keras {keras.__version__} "
                   f"cannot ({type(error).__name__}: {_first_line(error)})")


def _first_line(error: Exception, limit: int = 200) -> str:
    """The last line of an exception's text that says something (Keras wraps the cause in
    'Error when deserializing ... Exception encountered: <cause>'), cut to `limit` characters."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[-1] if lines else type(error).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."



def _load_keras2_sequential(keras, path: Path, error: Exception):
    """A Sequential model saved by Keras before 2.2.3 (its `model_config` lists the layers
    directly, the first one carrying `batch_input_shape`), which Keras 3's loader refuses
    ("pop expected at most 1 argument"). Rewritten on a copy in today's form, an InputLayer
    first, it loads with its weights as it is."""
    import json
    import shutil
    import tempfile

    import h5py

    fail = ModelError(f"{path}: Keras cannot load this file ({type(error).__name__}: {error})")
    try:
        with h5py.File(path, "r") as f:
            config = json.loads(f.attrs["model_config"])
    except Exception:  # noqa: BLE001 - not an HDF5 model file: Keras's own error says more
        raise fail from None
    if not isinstance(config, dict):   # `null`, a list: no model Keras wrote
        raise fail
    layers = config.get("config")
    if config.get("class_name") != "Sequential" or not isinstance(layers, list) or not layers:
        raise fail
    first = layers[0].get("config") if isinstance(layers[0], dict) else None
    if not isinstance(first, dict) or "batch_input_shape" not in first:
        raise fail
    shape = first.pop("batch_input_shape")
    entry = {"class_name": "InputLayer", "config": {"batch_shape": shape, "name": f"{first['name']}_input",
                                                    "dtype": first.get("dtype", "float32")}}
    config["config"] = {"name": "sequential", "layers": [entry] + layers}
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "model.h5"
        shutil.copyfile(path, copy)
        with h5py.File(copy, "r+") as f:
            f.attrs["model_config"] = json.dumps(config)
        try:
            return keras.models.load_model(str(copy), compile=False)
        except Exception:  # noqa: BLE001 - the original error is the one to report
            raise fail from None


def _freeze_saved_model(path: Path):
    tf = import_tf()
    if not (path / "saved_model.pb").exists():
        raise ModelError(f"{path}: a directory, but not a SavedModel (no saved_model.pb in it)")
    try:
        loaded = tf.saved_model.load(str(path))
    except Exception as e:
        return _freeze_saved_model_v1(path, e)
    signatures = dict(loaded.signatures)
    if not signatures:
        raise ModelError(f"{path}: the SavedModel has no signatures to convert")
    name = "serving_default" if "serving_default" in signatures else sorted(signatures)[0]
    return _freeze(signatures[name], path)



def _freeze_saved_model_v1(path: Path, error: Exception):
    """The SavedModel read as TF1 reads it: the serving MetaGraph in a session, its variables
    restored by name and folded into constants.

    Reviving the Python objects fails for some Keras exports whose optimizer state the
    installed TensorFlow no longer understands (basic-pitch's: '_UserObject' object has no
    attribute 'add_slot'); the serving graph needs none of those objects. The frozen graph
    is named as a TF2 signature's is: a placeholder per argument name, outputs `Identity`,
    `Identity_1`, ... in sorted key order (TF1 graphs keep inner names such as
    `serving_default_input_2` and outputs deep inside the model)."""
    tf = import_tf()
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_from_session_graph)

    graph = tf.Graph()
    try:
        with graph.as_default(), tf.compat.v1.Session(graph=graph) as sess:
            meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], str(path))
            signatures = meta.signature_def
            name = "serving_default" if "serving_default" in signatures else sorted(signatures)[0]
            signature = signatures[name]
            outputs = [signature.outputs[k].name for k in sorted(signature.outputs)]
            nodes = list(dict.fromkeys(split_tensor(t)[0] for t in outputs))
            graph_def = convert_variables_to_constants_from_session_graph(
                sess, graph.as_graph_def(), nodes)
    except Exception:  # noqa: BLE001 - the first error is the one that says what is wrong
        raise ModelError(f"{path}: TensorFlow cannot load this SavedModel "
                         f"({type(error).__name__}: {error})") from None
    renamed = {split_tensor(signature.inputs[k].name)[0]: k for k in sorted(signature.inputs)}
    for node in graph_def.node:
        node.name = renamed.get(node.name, node.name)
        for i, inp in enumerate(node.input):
            control = inp.startswith("^")
            src, sep, rest = inp.lstrip("^").partition(":")
            if src in renamed:
                node.input[i] = ("^" if control else "") + renamed[src] + sep + rest
    ids = []
    for i, tensor in enumerate(outputs):
        ids.append("Identity" if i == 0 else f"Identity_{i}")
        src, index = split_tensor(tensor)
        node = graph_def.node.add(name=ids[-1], op="Identity")
        node.input.append(src if index == 0 else f"{src}:{index}")
        node.attr["T"].type = signature.outputs[sorted(signature.outputs)[i]].dtype
    return tf.compat.v1.graph_util.extract_sub_graph(graph_def, ids)

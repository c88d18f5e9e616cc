"""Freeze a TF1 checkpoint that a PyPI package ships into the frozen GraphDef a user deploys.

musicnn ships its taggers as TF1 checkpoints (`.meta`, `.index`, `.data`) and rebuilds the
graph in code (`musicnn/models.py`, `tf.compat.v1.layers`) before restoring them; the saved
`.meta` is the training graph (optimizer, `tf.cond` on an `is_training` placeholder). This
script does what a user freezing it for deployment does: the package's own `define_model`
with `is_training=False` (batch norm in inference form, no dropout), the checkpoint restored,
variables folded into constants (`convert_variables_to_constants`), written as one `.pb`.

Run by benchmarks/zoo.py in a subprocess (TF1 graph mode and `tf.compat.v1.layers`, which
needs tf_keras with TF_USE_LEGACY_KERAS=1, stay out of the caller's process):

    python benchmarks/zoo_tf1_freeze.py PACKAGE_DIR MODEL FRAMES OUT.pb
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

N_MELS = 96  # musicnn's configuration.N_MELS
NUM_CLASSES = 50  # both the MTT and the MSD taggers output 50 tags


def freeze_musicnn(package_dir: Path, model: str, frames: int, out: Path) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if importlib.util.find_spec("tf_keras") is None:
        sys.exit("musicnn's model code needs tf.compat.v1.layers, which lives in tf-keras: "
                 "pip install -e '.[corpus]'")
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # tf.compat.v1.layers lives in tf_keras
    import tensorflow as tf

    sys.path.insert(0, str(package_dir))  # the package's own model code, `import musicnn`
    from musicnn import models  # noqa: PLC0415

    tf.compat.v1.disable_eager_execution()
    graph = tf.Graph()
    with graph.as_default():
        with tf.name_scope("model"):
            x = tf.compat.v1.placeholder(tf.float32, [1, frames, N_MELS], name="spectrogram")
            logits = models.define_model(x, False, model, NUM_CLASSES)[0]
            tf.nn.sigmoid(logits, name="tags")
        with tf.compat.v1.Session(graph=graph) as sess:
            tf.compat.v1.train.Saver().restore(sess, str(package_dir / "musicnn" / model) + "/")
            frozen = tf.compat.v1.graph_util.convert_variables_to_constants(
                sess, graph.as_graph_def(), ["model/tags"])
    frozen = tf.compat.v1.graph_util.extract_sub_graph(frozen, ["model/tags"])
    out.write_bytes(frozen.SerializeToString())


if __name__ == "__main__":
    freeze_musicnn(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]))

"""Shared by tests/cli/ and the other CLI tests: run the CLI as a user would.

Each test gets a temporary working directory holding a copy of examples/digits and
deployment files whose paths point at it; the CLI runs as a subprocess there.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
DIGITS = ROOT / "examples" / "digits"


def sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def cli(*args, cwd, env=None, timeout=120):
    """`python tools/converter.py ARGS` in `cwd`; returns the CompletedProcess."""
    return subprocess.run([sys.executable, str(ROOT / "tools" / "converter.py"), *map(str, args)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def digits_model(**overrides) -> dict:
    """The digits example's model entry, paths relative to the work dir (see `workdir`)."""
    sg = {"input_tensors": "image", "input_shapes": "1,8,8,1", "input_data_formats": "NHWC",
          "input_ranges": "-1,1", "output_tensors": "prob", "output_shapes": "1,10",
          "output_data_formats": "NONE",
          "validation_inputs_data": ["digits/inputs/image_0.npy"]}
    model = {"platform": "onnx", "model_file_path": "digits/digits_cnn.onnx",
             "model_sha256_checksum": sha256(DIGITS / "digits_cnn.onnx"), "subgraphs": [sg],
             "runtime": "cpu", "winograd": 0}
    for key, value in overrides.items():
        target = sg if key in sg or key.startswith(("input_", "output_", "validation_inputs")) else model
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
    return model


def write_deployment(path: Path, models: dict, library: str = "digits", **top) -> Path:
    data = {"library_name": library, "target_abis": ["host"], "model_graph_format": "file",
            "model_data_format": "file", **top, "models": models}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def workdir(tmp_path: Path) -> Path:
    """tmp_path/work with digits/ (a copy of examples/digits) and deploy.yml for it."""
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(DIGITS, work / "digits", ignore=shutil.ignore_patterns("__pycache__"))
    write_deployment(work / "deploy.yml", {"digits_cnn": digits_model()})
    return work


def save_onnx(path: Path, nodes, inputs, outputs, initializers=(), opset: int = 13) -> str:
    """Write a small ONNX model; inputs/outputs are (name, shape) pairs; returns its sha256."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return sha256(path)


def conv_model(path: Path, input_name: str = "input:0", output_name: str = "scope/out") -> str:
    """A Conv (3 -> 4 channels, 3x3, pad 1) + Relu on a 1x3x6x6 input; names with ':' and '/'."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(7)
    w = numpy_helper.from_array(rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32), "conv/w")
    b = numpy_helper.from_array(rng.uniform(-1, 1, (4,)).astype(np.float32), "conv/b")
    nodes = [helper.make_node("Conv", [input_name, "conv/w", "conv/b"], ["conv/y"], name="conv",
                              pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["conv/y"], [output_name], name="relu")]
    return save_onnx(path, nodes, [(input_name, [1, 3, 6, 6])], [(output_name, [1, 4, 6, 6])], [w, b])


def unsupported_model(path: Path) -> str:
    """Relu then Unique (no frontend maps it): inputs boxes [1,4,4], scores [1,1,4]."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["scores"], ["s"], name="relu1"),
             helper.make_node("Unique", ["s"], ["selected"], name="unique_node")]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 4, 4]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1, 4])],
        [helper.make_tensor_value_info("selected", TensorProto.FLOAT, [None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return sha256(path)


def unsupported_entry(path: Path, checksum: str) -> dict:
    return {"platform": "onnx", "model_file_path": str(path), "model_sha256_checksum": checksum,
            "subgraphs": [{"input_tensors": "boxes,scores", "input_shapes": ["1,4,4", "1,1,4"],
                           "input_data_formats": "NONE", "output_tensors": "selected",
                           "output_data_formats": "NONE"}]}


def small_model_entry(path: Path, checksum: str, inputs: str, shape: str, outputs: str,
                      fmt: str = "NONE", **extra) -> dict:
    sg = {"input_tensors": inputs, "input_shapes": shape, "input_data_formats": fmt,
          "output_tensors": outputs, "output_data_formats": fmt}
    return {"platform": "onnx", "model_file_path": str(path), "model_sha256_checksum": checksum,
            "subgraphs": [sg], **extra}


def files_of(directory: Path) -> dict:
    """relative path -> bytes of every file under `directory`."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@contextlib.contextmanager
def http_server(directory: Path):
    """Serve `directory` on 127.0.0.1 from a thread; yields (base URL, list of request paths)."""
    import functools
    import http.server
    import threading

    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's naming
            requests.append(self.path)
            super().do_GET()

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                            functools.partial(Handler, directory=str(directory)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", requests
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def no_proxy_env() -> dict:
    """os.environ without proxies, so that 127.0.0.1 is reached directly."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    env["no_proxy"] = env["NO_PROXY"] = "127.0.0.1,localhost"
    return env


def hint_commands(message: str) -> list:
    """The commands a message tells the user to run: every `...` after "run " (or "re-run ")."""
    return re.findall(r"\brun `([^`]+)`", message)


def run_hint(message: str, cwd, env=None, timeout=300):
    """Run, through the shell and exactly as printed, the one command `message` tells the user to
    run (a hint must be the command that fixes the problem: the test then checks that it did)."""
    commands = hint_commands(message)
    assert len(commands) == 1, f"expected one `run` hint in:\n{message}"
    return subprocess.run(["/bin/sh", "-c", commands[0]], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


HEX64 = re.compile(r"\b[0-9a-f]{64}\b")


def make_example(name: str, tmp_path: Path, files=("make_model.py", "mobilenet_v2.yml"), timeout=600) -> tuple:
    """Run examples/<name>/make_model.py in a copy of `files` under tmp_path/examples/<name>, as a
    user would; returns (that folder, what the script printed)."""
    work = tmp_path / "examples" / name
    work.mkdir(parents=True)
    for f in files:
        shutil.copy(ROOT / "examples" / name / f, work / f)
    made = subprocess.run([sys.executable, str(work / "make_model.py")], capture_output=True, text=True,
                          timeout=timeout)
    assert made.returncode == 0, made.stdout + made.stderr
    return work, made.stdout


def only_checksums_differ(text: str, shipped: str) -> bool:
    """A generator pinned its sha256 into the .yml: that value changed and nothing else."""
    return HEX64.sub("", text) == HEX64.sub("", shipped)


def convert_and_validate(yml, cwd, timeout=600) -> None:
    """`convert`, then `run --validate` passing, through the CLI."""
    r = cli("convert", "--config", yml, cwd=cwd, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli("run", "--config", yml, "--validate", cwd=cwd, timeout=timeout)
    assert r.returncode == 0 and "Similarity test passed" in r.stdout, r.stdout + r.stderr

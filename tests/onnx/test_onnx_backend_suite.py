"""onnx's own backend test suite, run by onnx's own runner over pymace.

`onnx.backend.test.BackendTest` grades each case itself (output count, shapes,
dtypes, values within the case's tolerance). Its node, simple and
PyTorch-converted/operator cases ship inside the onnx wheel (no downloads) and
run on the CPU engine. A case the converter refuses with a clear error shows as
a skip with that error as the reason; a wrong number, dtype or shape fails.
docs/onnx_conformance.md is generated from the same run
(`python tools/onnx_conformance.py`).
"""
import pytest

pytest.importorskip("onnx", reason="onnx is not installed (the [test] extra)")

from mace.testing.onnx_backend_suite import backend_test  # noqa: E402

globals().update(backend_test(__name__))

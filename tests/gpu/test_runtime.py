"""The GPU runtime's own machinery: image reuse, kernel-time slicing, transfers, device choice."""
import subprocess
import sys

import numpy as np

from mace.runtime.engine import Engine
from tests.gpu.gpu_case import assert_close, chain_graph, op_graph, run_both


def relu_chain(n=6, shape=(1, 9, 11, 6)):
    steps = [("Activation", [f"t{i}"], [f"t{i + 1}"], {"activation": "RELU" if i % 2 else "TANH"})
             for i in range(n)]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    return chain_graph(steps, {"t0": x}, outputs=(f"t{n}",)), {"t0": x}


def test_images_are_reused_between_tensors_that_do_not_overlap():
    graph, feed = relu_chain()
    cpu, gpu, engine = run_both(graph, feed, "fp32_fp32")
    assert_close(cpu, gpu, "fp32_fp32")
    plan = engine.gpu.image_plan
    assert len(plan.blocks) <= 3 < len(plan.assignment)      # a chain needs ping-pong images only
    assert plan.pixels < plan.tensor_pixels
    # nothing but the input and the output needs host memory
    assert set(engine.plan.offsets) == {"t0", "t6"}


def test_limit_opencl_kernel_time_slices_long_kernels_with_the_same_result():
    x = np.random.default_rng(1).standard_normal((1, 131, 129, 4)).astype(np.float32)
    graph = op_graph("Activation", {"x": x}, activation="SIGMOID")
    whole = Engine(graph, device="gpu", options={"data_type": "fp32_fp32"})
    sliced = Engine(graph, device="gpu", options={"data_type": "fp32_fp32", "limit_opencl_kernel_time": 1})
    before = (whole.gpu.launches, sliced.gpu.launches)
    a, b = whole.run({"x": x})["y"], sliced.run({"x": x})["y"]
    np.testing.assert_array_equal(a, b)
    assert sliced.gpu.launches - before[1] > whole.gpu.launches - before[0]


def test_transfers_join_cpu_and_gpu_ops():
    # Conv (GPU) -> LocalResponseNorm (no GPU kernel: CPU) -> Conv (GPU)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 6, 5, 3)).astype(np.float32)
    steps = [("Conv2D", ["x", "w1"], ["a"], {"pads": [1, 1, 1, 1]}),
             ("LocalResponseNorm", ["a"], ["b"], {"size": 3, "alpha": 1e-4, "beta": 0.75, "bias": 1.0}),
             ("Conv2D", ["b", "w2"], ["y"], {})]
    consts = {"w1": rng.standard_normal((5, 3, 3, 3)).astype(np.float32),
              "w2": rng.standard_normal((4, 5, 1, 1)).astype(np.float32)}
    graph = chain_graph(steps, {"x": x}, consts)
    cpu, gpu, engine = run_both(graph, {"x": x}, "fp32_fp32")
    assert_close(cpu, gpu, "fp32_fp32")
    assert [engine.gpu.runs(op) for op in graph.net.op] == [True, False, True]
    assert engine.gpu.downloads["op0"] == ["a"] and engine.gpu.uploads["op2"] == ["b"]
    assert engine.gpu.uploads["op0"] == ["x"] and engine.gpu.downloads["op2"] == ["y"]


def test_a_missing_device_is_reported_with_its_reason():
    code = ("import os; os.environ['MACE_OPENCL_DEVICE'] = 'no-such-device'\n"
            "from mace.runtime.gpu import unavailable_reason; print(unavailable_reason())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "no OpenCL device matching MACE_OPENCL_DEVICE='no-such-device'" in done.stdout

"""The GPU runtime: tensors in OpenCL 2-D images (MACE's layouts), kernels in mace/ops/gpu/.

Entry points: `Engine(graph, device="gpu")` (or "cpu+gpu"), `unavailable_reason()`
(None when an OpenCL device works here). Nothing in this package imports
pyopencl until a GPU engine is built. See docs/gpu.md.
"""
from mace.runtime.gpu.context import GpuUnavailable, unavailable_reason  # noqa: F401


"""Every test here needs an OpenCL device; without one each is skipped with the reason
(shown in pytest's -ra summary), never silently."""
import pytest

from tests.gpu.gpu_case import require_gpu


@pytest.fixture(autouse=True)
def _opencl_device():
    require_gpu()

"""OpenCL kernels of the GPU runtime, registered under the tag "gpu" beside each op's "cpu" one.

One module per op (or family); the OpenCL C sources are in cl/ (compiled at run
time by mace/runtime/gpu/programs.py). The numpy "cpu" kernels stay the
reference: tests/gpu/ checks every kernel here against them.
"""

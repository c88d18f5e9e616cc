"""Op types: one module per op (spec + shape function + kernels). See registry.py."""
from mace.ops.registry import Layout, all_ops, kernel, register_op, select_kernel, spec  # noqa: F401

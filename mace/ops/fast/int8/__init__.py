"""Fast int8 kernels, tag "int8:fast": tried before the exact "int8" reference kernels
(mace/ops/int8) on CPU and in the DSP simulator, and bit-identical to them.

They compute the same integers another way: an integer GEMM with the CPU's dot-product
instruction (_qloops.py, _qgemm.py) instead of float64 BLAS over centred integers,
compiled loops instead of numpy passes. Each declines (`check(ctx)` says why) what it
does not cover (no numba, MACE_NO_JIT=1, shapes whose int32 sums could overflow, ...), and
the reference kernel runs instead. They are asked at load only (ctx.stage LOAD). tests/quantize/test_int8_fast.py holds them to the
reference byte for byte.
"""

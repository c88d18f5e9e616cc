"""Fast CPU kernels, registered under the tag "cpu:fast" beside each op's "cpu" one.

The engine tries "cpu:fast" first (mace/runtime/engine.py). These kernels do the
same maths as the numpy reference kernels in mace/ops/ but shape everything at
load: weights packed for the GEMM they feed, views computed once in `bind`,
temporaries carved from the engine's shared scratch region, bias and activation
applied in place. The "cpu" kernels stay the oracle: tests/ops/test_fast_kernels.py
checks every kernel here against them on random shapes.
"""

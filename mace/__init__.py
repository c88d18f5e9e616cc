"""pymace: deploy neural networks from one MACE-style deployment file.

Data flows one way: config -> frontend -> IR -> passes -> runtime -> results.
"""
from mace._blas import prefer_avx512_kernels

prefer_avx512_kernels()  # before numpy loads OpenBLAS; see mace/_blas.py

__version__ = "0.1.0"

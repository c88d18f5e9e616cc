"""Quantization: the uint8 scheme (params.py), range files and statistics (ranges.py),
the graph pass that quantizes a float model (mace/transform/passes/quantize.py)
and calibration (calibrate.py). docs/quantization.md describes the scheme."""

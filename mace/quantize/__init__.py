"""Quantization: the uint8 scheme (params.py), range files and statistics (ranges.py),
the graph pass that quantizes a float model (mace/transform/passes/quantize.py),
calibration (calibrate.py) and the quantization-aware ranges a model carried (qat_ranges.py).
docs/quantization.md describes the scheme."""

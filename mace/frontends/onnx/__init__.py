"""ONNX frontend: frontend.py drives it; ops_*.py map ONNX node types to IR ops."""

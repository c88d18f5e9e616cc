"""Tests of mace.frontends.onnx."""

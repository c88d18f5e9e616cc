"""Helpers shared by tests and benchmarks (real models that installed packages ship)."""

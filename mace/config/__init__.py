"""Deployment files (MACE's .yml schema): load, validate, fill defaults, fetch models.

`from mace.config import load_deployment` (and the config classes) is the public API. The names
are looked up on first use (PEP 562), so the modules of this package import each other
without a cycle through this file.
"""
import importlib

_EXPORTS = ("DeploymentConfig", "ModelConfig", "SubgraphConfig", "load_deployment")


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module("mace.config.deployment"), name)
    raise AttributeError(f"module 'mace.config' has no attribute {name!r}")

"""`build`: convert, then lay out under builds/<library_name>/ everything a device needs
(the runner per target ABI, OpenCL files, build.json: mace/devices/build.py)."""
from __future__ import annotations

from mace.config.deployment import DeploymentConfig
from mace.convert import convert_deployment
from mace.devices.build import BuildResult, package_library


def build_library(config: DeploymentConfig, build_dir=None, models=None) -> BuildResult:
    return package_library(config, convert_deployment(config, build_dir, models), build_dir)

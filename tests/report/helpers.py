"""Shared by tests/report: a converted copy of the digits example, loaded as the library sees it."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from mace.config import load_deployment
from mace.convert import convert_deployment
from mace.report.session import open_model
from tests.cli_helpers import workdir

BUILD = "out"


def converted_digits(tmp_path: Path):
    """(work dir, DeploymentConfig) with digits converted into work/out."""
    work = workdir(tmp_path)
    config = load_deployment(work / "deploy.yml")
    convert_deployment(config, work / BUILD)
    return work, config


def digits_session(work: Path, config):
    return open_model(config, config.models["digits_cnn"], work / BUILD)


def conv2d_nhwc(x, w, b, stride: int, pad: int) -> np.ndarray:
    """Reference 2-D convolution by loops: x NHWC, w OIHW, symmetric zero padding."""
    n, h, wd, c = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, oh, ow, o), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]  # n kh kw c
            y[:, i, j, :] = np.einsum("nhwc,ochw->no", patch, w)
    return y + b

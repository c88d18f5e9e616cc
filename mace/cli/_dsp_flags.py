"""The DSP flag of `run` and `benchmark`: --dsp_backend NAME overrides the .yml key dsp_backend."""
from __future__ import annotations

from mace.runtime.dsp.registry import DEFAULT_BACKEND, ENTRY_POINT_GROUP


def add_arguments(p) -> None:
    p.add_argument("--dsp_backend", default=None, metavar="NAME",
                   help=f"DSP backend for runtime: dsp models, overriding the .yml key dsp_backend "
                        f"(default {DEFAULT_BACKEND}, the Hexagon simulator; plugins register under "
                        f"the entry point group {ENTRY_POINT_GROUP}, see docs/dsp.md)")


def apply(config, args) -> None:
    """Write the flag into every subgraph, marked as coming from the command line (errors name it)."""
    name = getattr(args, "dsp_backend", None)
    if not name:
        return
    for model in config.models.values():
        for sg in model.subgraphs:
            sg.values["dsp_backend"] = name
            sg.origin["dsp_backend"] = "--dsp_backend"

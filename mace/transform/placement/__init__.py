"""Placement: which runtime (CPU, GPU, DSP) runs each op of a model (docs/placement.md).

    plan.py       the entry point: `plan_for(config, model)` reads named subgraphs and
                  `placement:` rules into a PlacementPlan; `place_plan` applies it to a graph
    auto.py       `placement: auto`: a cost model picks each op's runtime
    place_ops.py  the pass (last but one in transform/pipeline.py): applies the plan, or puts
                  every op the GPU kernels take on the GPU (mace/ops/gpu/support.py)
    groups.py     reading a placed graph back: runs of ops on one runtime, transfers between them
    timing.py     per-group and per-transfer times for `benchmark` (from the profiler's stats)

This __init__ imports nothing: groups.py and timing.py ship to devices inside the runner
(mace/devices/runner_zip.py), which has no deployment-file reader.
"""

"""Flags that pick where sample loops run: in this process, or on Ray (docs/scale.md).
Shared by `run` (accuracy_validation_script, --quantize_stat) and `sweep`. Ray itself loads
only when a loop runs on it (mace/scale/ray_pool.py)."""
from __future__ import annotations

import os

from mace.scale.runner import CLUSTERS, address_of, make_cluster


def add_arguments(p) -> None:
    g = p.add_argument_group("scale-out (see docs/scale.md)")
    g.add_argument("--cluster", default="local", choices=CLUSTERS,
                   help="where the accuracy script's and --quantize_stat's samples run: local (this "
                        "process) or ray (sharded over Ray workers; without --ray_address an embedded Ray "
                        "that listens on 127.0.0.1 only, dashboard off)")
    g.add_argument("--ray_address", default=None, metavar="ADDR",
                   help="an existing Ray cluster (host:port, ray://host:port or auto; what makes one safe: "
                        "docs/scale.md, Security); default: RAY_ADDRESS where set, else start Ray here, "
                        "on 127.0.0.1 only")
    g.add_argument("--workers", type=int, default=2, metavar="N",
                   help="Ray workers (actors) that each load the engine once; capped at the shards of "
                        "samples and the CPUs (this machine's, or the cluster's)")
    g.add_argument("--no_resume", dest="resume", action="store_false",
                   help="discard the finished shards a failed run left under builds/<library>/ "
                        "instead of resuming from them (resume: %(default)s)")


def cluster_of(args):
    """RAY_ADDRESS in the environment joins that cluster as --ray_address would (Ray's rule), with
    the same checks; it means nothing to --cluster local."""
    address, source = args.ray_address, "--ray_address"
    if args.cluster == "ray":
        address, source = address_of(args.ray_address, os.environ)
    return make_cluster(args.cluster, address, args.workers, source)

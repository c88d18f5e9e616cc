"""Flags that pick where sample loops run: in this process, or on Ray (docs/scale.md).
Shared by `run` (accuracy_validation_script, --quantize_stat) and `sweep`. Ray itself loads
only when a loop runs on it (mace/scale/ray_pool.py)."""
from __future__ import annotations

from mace.scale.runner import CLUSTERS, make_cluster


def add_arguments(p) -> None:
    g = p.add_argument_group("scale-out (see docs/scale.md)")
    g.add_argument("--cluster", default="local", choices=CLUSTERS,
                   help="where the accuracy script's and --quantize_stat's samples run: local (this "
                        "process) or ray (sharded over Ray workers; without --ray_address an embedded Ray "
                        "that listens on 127.0.0.1 only, dashboard off)")
    g.add_argument("--ray_address", default=None, metavar="ADDR",
                   help="an existing Ray cluster (e.g. ray://head:10001 or auto; what makes one safe: "
                        "docs/scale.md, Security); default: start Ray here, on 127.0.0.1 only")
    g.add_argument("--workers", type=int, default=2, metavar="N",
                   help="Ray workers (actors) that each load the engine once")
    g.add_argument("--no_resume", dest="resume", action="store_false",
                   help="discard the finished shards a failed run left under builds/<library>/ "
                        "instead of resuming from them (resume: %(default)s)")


def cluster_of(args):
    return make_cluster(args.cluster, args.ray_address, args.workers)

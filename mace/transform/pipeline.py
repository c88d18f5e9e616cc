"""The pass list: the single source of truth for how a model is optimised.

Each pass is `fn(graph, options) -> changed`; the transformer applies them in
order, re-running a pass until it reports no change (to a bound), and can dump
the IR after each one (`convert --dump_passes DIR`). `options` is input only: a
pass that decides something its caller needs (the quantize pass's calibration
report, the placement pass's reasons) returns it as `Decided(value)`, and
`transform` hands it back in `Transformed.decided[pass name]`. Later features (quantize,
placement, winograd) add their passes here, each guarded by `when`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from mace.errors import MaceError, ModelError
from mace.ir.model_io import net_to_text
from mace.transform.decided import Decided
from mace.transform.passes.cleanup import remove_dead_ops, remove_identity, skip_integral_casts
from mace.transform.passes.flatten_atrous_conv import flatten_atrous_conv
from mace.transform.passes.fold_affine_into_conv import fold_affine_into_conv
from mace.transform.passes.fold_batchnorm import fold_batchnorm
from mace.transform.passes.fold_channel_shuffle import fold_channel_shuffle
from mace.transform.passes.fold_constants import fold_constants
from mace.transform.passes.fold_flatten_transpose import fold_flatten_transpose
from mace.transform.passes.fold_into_batchnorm import fold_into_batchnorm
from mace.transform.passes.fold_pad_into_conv import fold_pad_into_conv
from mace.transform.passes.fold_reshape_pairs import fold_reshape_pairs
from mace.transform.passes.fold_transposes import fold_transposes
from mace.transform.passes.fuse_activation import fuse_activation
from mace.transform.passes.fuse_gelu import fuse_gelu
from mace.transform.passes.fuse_hardswish import fuse_hardswish
from mace.transform.passes.fuse_paddle_hardswish import fuse_paddle_hardswish
from mace.transform.passes.fuse_layer_norm import fuse_layer_norm
from mace.transform.passes.fuse_matmul_integer_to_float import fuse_matmul_integer_to_float
from mace.transform.passes.fuse_stream_buffer import fuse_stream_buffer
from mace.transform.passes.fuse_skip_layer_norm import fuse_skip_layer_norm
from mace.transform.passes.lower_fake_quantize import lower_fake_quantize
from mace.transform.passes.mark_ragged import mark_ragged
from mace.transform.passes.merge_constants import merge_constants
from mace.transform.passes.quantize import quantize_graph, wants_quantize
from mace.transform.passes.sort import sort_topologically
from mace.transform.passes.to_nhwc import to_nhwc
from mace.transform.passes.winograd import mark_winograd
from mace.transform.placement.place_ops import place_ops, wants_placement
from mace.transform.shape_inference import infer_shapes


@dataclass
class Transformed:
    graph: object
    decided: dict = field(default_factory=dict)   # pass name -> Decided.value


@dataclass(frozen=True)
class Pass:
    name: str
    fn: Callable
    repeat: bool = True                                  # run to a fixpoint
    when: Callable = staticmethod(lambda options: True)  # options -> bool


def _infer(graph, options) -> bool:
    infer_shapes(graph)
    return False


PASSES = [
    Pass("sort_topologically", sort_topologically, repeat=False),
    Pass("infer_shapes", _infer, repeat=False),
    # before the fusions: quantizing, a Q/DQ pair's rounding is the quantize pass's own
    Pass("lower_fake_quantize", lower_fake_quantize, repeat=False, when=wants_quantize),
    Pass("skip_integral_casts", skip_integral_casts),
    Pass("remove_identity", remove_identity),
    Pass("fold_constants", fold_constants),
    Pass("remove_dead_ops", remove_dead_ops),
    Pass("flatten_atrous_conv", flatten_atrous_conv),
    Pass("fold_batchnorm", fold_batchnorm),
    Pass("fuse_gelu", fuse_gelu),
    Pass("fuse_hardswish", fuse_hardswish),
    Pass("fuse_paddle_hardswish", fuse_paddle_hardswish),
    Pass("fuse_layer_norm", fuse_layer_norm),
    Pass("fuse_skip_layer_norm", fuse_skip_layer_norm),
    Pass("fold_reshape_pairs", fold_reshape_pairs),
    Pass("fuse_activation", fuse_activation),
    Pass("fold_into_batchnorm", fold_into_batchnorm),
    Pass("fold_affine_into_conv", fold_affine_into_conv),
    Pass("fold_pad_into_conv", fold_pad_into_conv),
    Pass("fuse_matmul_integer_to_float", fuse_matmul_integer_to_float),
    Pass("to_nhwc", to_nhwc, repeat=False),
    Pass("fold_transposes", fold_transposes),
    Pass("fold_constants_after_layout", fold_constants),
    Pass("fold_channel_shuffle", fold_channel_shuffle),
    Pass("fold_flatten_transpose", fold_flatten_transpose),
    # after the layout passes: the buffer's axis is final
    Pass("fuse_stream_buffer", fuse_stream_buffer),
    Pass("remove_dead_ops_final", remove_dead_ops),
    Pass("sort_topologically_final", sort_topologically, repeat=False),
    Pass("infer_shapes_final", _infer, repeat=False),
    Pass("mark_winograd", mark_winograd, repeat=False),
    # placement first: with dsp groups, quantize rewrites only the ops placed there
    Pass("place_ops", place_ops, repeat=False, when=wants_placement),
    Pass("quantize", quantize_graph, repeat=False, when=wants_quantize),
    # after quantize: its per-op copies of one weight merge too
    Pass("merge_constants", merge_constants, repeat=False),
    # last: records which model outputs the engine cuts to a data-dependent length
    Pass("mark_ragged", mark_ragged, repeat=False),
]

MAX_REPEATS = 50


def _enabled(p: Pass, options: dict) -> bool:
    """A pass runs unless its guard says no, it is skipped, or a pass list leaves it out.

    `only_passes` (graph_optimize_options in the .yml) never drops the passes the
    runtime depends on (layout, sorting, shapes).
    """
    if not p.when(options) or p.name in options.get("skip_passes", ()):
        return False
    only = options.get("only_passes")
    return not only or p.name in only or p.name in REQUIRED


REQUIRED = {"quantize", "mark_ragged", "sort_topologically", "infer_shapes", "to_nhwc", "fold_transposes",
            "sort_topologically_final", "infer_shapes_final", "place_ops"}


def pass_names() -> list:
    return [p.name for p in PASSES]


def transform(graph, options: dict | None = None, dump_dir: Path | None = None, log=None) -> Transformed:
    """Run the pass list over `graph` in place; optionally dump the IR after each pass."""
    options = options or {}
    result = Transformed(graph)
    if dump_dir:
        Path(dump_dir).mkdir(parents=True, exist_ok=True)
        _dump(graph, dump_dir, 0, "frontend")
    for index, p in enumerate(PASSES, start=1):
        if not _enabled(p, options):
            continue
        try:
            for _ in range(MAX_REPEATS if p.repeat else 1):
                changed = p.fn(graph, options)
                if isinstance(changed, Decided):
                    result.decided[p.name], changed = changed.value, changed.changed
                if not changed:
                    break
        except MaceError:
            raise
        except Exception as e:
            raise ModelError(f"pass '{p.name}' failed: {e}") from e
        if log:
            log(f"pass {p.name}: {len(graph.net.op)} ops")
        if dump_dir:
            _dump(graph, dump_dir, index, p.name)
    return result


def _dump(graph, dump_dir, index, name):
    path = Path(dump_dir) / f"{index:02d}_{name}.pbtxt"
    path.write_text(net_to_text(graph.net))

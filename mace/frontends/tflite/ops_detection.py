"""Detection post-processing: NON_MAX_SUPPRESSION_V4 / V5 and the custom TFLite_Detection_PostProcess.

NON_MAX_SUPPRESSION_V4/V5 (what the converter writes for tf.image.non_max_suppression and
non_max_suppression_with_scores): boxes [N, 4] and scores [N] of one class; LiteRT always pads the
selected indices (and V5's scores) with zeros to max_output_size and returns the valid count; a box
whose IoU with a kept one is >= iou_threshold is dropped (TensorFlow: >), soft NMS (V5's
soft_nms_sigma > 0) included: the IR's SoftNonMaxSuppression (mace/frontends/single_class_nms.py).
max_output_size and the thresholds must be constant.

TFLite_Detection_PostProcess (TF Object Detection API SSD exports) becomes the IR's
DetectionPostProcess op (mace/ops/detection_post_process.py), its flexbuffer options as args.
"""
import numpy as np

from mace.frontends.single_class_nms import add_soft_nms
from mace.frontends.tflite.registry import tfl_op


@tfl_op("NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5")
def non_max_suppression(ctx, op):
    v5 = op.type.endswith("V5")
    limit = int(_scalar(ctx, op, 2, "max_output_size"))
    sigma = _scalar(ctx, op, 5, "soft_nms_sigma") if v5 else 0.0
    outputs = (ctx.out(op, 0), ctx.out(op, 1) if v5 else None, ctx.out(op, 2 if v5 else 1))
    add_soft_nms(ctx, op, ctx.inp(op, 0), ctx.inp(op, 1), limit, _scalar(ctx, op, 3, "iou_threshold"),
                 _scalar(ctx, op, 4, "score_threshold"), sigma, True, True, outputs)


def _scalar(ctx, op, i: int, what: str) -> float:
    return float(np.asarray(ctx.static(op, i, what), np.float64).reshape(-1)[0])


# TFLite_Detection_PostProcess's flexbuffer options: (name, type, default; None: required)
POST_PROCESS_OPTIONS = (("max_detections", int, None), ("max_classes_per_detection", int, 1),
                        ("detections_per_class", int, 100), ("use_regular_nms", int, 0),
                        ("nms_score_threshold", float, None), ("nms_iou_threshold", float, None),
                        ("num_classes", int, None), ("y_scale", float, None), ("x_scale", float, None),
                        ("h_scale", float, None), ("w_scale", float, None))


@tfl_op("TFLite_Detection_PostProcess")
def detection_post_process(ctx, op):
    options = _flexbuffer_map(ctx, op)
    args = {}
    for name, kind, default in POST_PROCESS_OPTIONS:
        value = options.get(name, default)
        if value is None:
            raise ctx.fail(op, f"custom option '{name}' is missing (it has {sorted(options)})")
        args[name] = kind(value)
    if ctx.const(ctx.inp(op, 2)) is None:
        raise ctx.fail(op, "the anchors (input 2) must be constant")
    ctx.add("DetectionPostProcess", op, ctx.inputs(op)[:3], outputs=[ctx.out(op, i) for i in range(4)], **args)


def _flexbuffer_map(ctx, op) -> dict:
    from flatbuffers import flexbuffers   # the tflite package's dependency; only this op needs it
    try:
        options = flexbuffers.Loads(bytes(op.custom_options))
    except Exception as e:   # a malformed buffer fails anywhere in the decoder
        raise ctx.fail(op, f"custom options are not a flexbuffer map ({type(e).__name__}: {e})") from None
    if not isinstance(options, dict):
        raise ctx.fail(op, f"custom options are a flexbuffer {type(options).__name__}, not a map")
    return options

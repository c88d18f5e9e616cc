"""Write a .tflite FlatBuffer by hand with the tflite schema package, for what TensorFlow's
converter no longer emits: a TFLite_Detection_PostProcess fed uint8 tensors directly."""
from __future__ import annotations

from pathlib import Path

import flatbuffers
import numpy as np
import tflite
from flatbuffers import flexbuffers


def _vector(b, start, items, kind="int32"):
    start(b, len(items))
    for x in reversed(items):
        {"int32": b.PrependInt32, "float": b.PrependFloat32, "int64": b.PrependInt64, "uoffset": b.PrependUOffsetTRelative, "uint8": b.PrependUint8}[kind](x)
    return b.EndVector()

def uint8_ssd_tail(path, anchors_q, anchor_q, box_q, cls_q, n, width, options: dict):
    """A quantized SSD export's last op as TF1's Object Detection API + TOCO wrote it (the classic
    coco_ssd_mobilenet quant sample): uint8 box encodings and class predictions, uint8 constant
    anchors (each with its (scale, zero point)) straight into TFLite_Detection_PostProcess."""
    b = flatbuffers.Builder(1024)
    D = options["max_detections"] * options["max_classes_per_detection"]
    # tensors: (name, shape, type, buffer, (scale, zero_point) or None)
    U8, F32 = tflite.TensorType.UINT8, tflite.TensorType.FLOAT32
    specs = [("box_encodings", [1, n, 4], U8, 0, box_q), ("class_predictions", [1, n, width], U8, 0, cls_q),
             ("anchors", [n, 4], U8, 1, anchor_q), ("detection_boxes", [1, D, 4], F32, 0, None),
             ("detection_classes", [1, D], F32, 0, None), ("detection_scores", [1, D], F32, 0, None),
             ("num_detections", [1], F32, 0, None)]
    tensors = []
    for name, shape, kind, buf, q in specs:
        name_off = b.CreateString(name)
        shape_off = _vector(b, tflite.TensorStartShapeVector, shape)
        q_off = None
        if q:
            scale_off = _vector(b, tflite.QuantizationParametersStartScaleVector, [q[0]], "float")
            zp_off = _vector(b, tflite.QuantizationParametersStartZeroPointVector, [q[1]], "int64")
            tflite.QuantizationParametersStart(b)
            tflite.QuantizationParametersAddScale(b, scale_off)
            tflite.QuantizationParametersAddZeroPoint(b, zp_off)
            q_off = tflite.QuantizationParametersEnd(b)
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, shape_off)
        tflite.TensorAddType(b, kind)
        tflite.TensorAddBuffer(b, buf)
        tflite.TensorAddName(b, name_off)
        if q_off is not None:
            tflite.TensorAddQuantization(b, q_off)
        tensors.append(tflite.TensorEnd(b))
    options_bytes = flexbuffers.Dumps(options)
    custom_off = _vector(b, tflite.OperatorStartCustomOptionsVector, list(options_bytes), "uint8")
    ins = _vector(b, tflite.OperatorStartInputsVector, [0, 1, 2])
    outs = _vector(b, tflite.OperatorStartOutputsVector, [3, 4, 5, 6])
    tflite.OperatorStart(b)
    tflite.OperatorAddOpcodeIndex(b, 0)
    tflite.OperatorAddInputs(b, ins)
    tflite.OperatorAddOutputs(b, outs)
    tflite.OperatorAddCustomOptions(b, custom_off)
    op = tflite.OperatorEnd(b)
    tensors_off = _vector(b, tflite.SubGraphStartTensorsVector, tensors, "uoffset")
    sg_in = _vector(b, tflite.SubGraphStartInputsVector, [0, 1])
    sg_out = _vector(b, tflite.SubGraphStartOutputsVector, [3, 4, 5, 6])
    ops_off = _vector(b, tflite.SubGraphStartOperatorsVector, [op], "uoffset")
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, tensors_off)
    tflite.SubGraphAddInputs(b, sg_in)
    tflite.SubGraphAddOutputs(b, sg_out)
    tflite.SubGraphAddOperators(b, ops_off)
    sg = tflite.SubGraphEnd(b)
    code_name = b.CreateString("TFLite_Detection_PostProcess")
    tflite.OperatorCodeStart(b)
    tflite.OperatorCodeAddDeprecatedBuiltinCode(b, tflite.BuiltinOperator.CUSTOM)
    tflite.OperatorCodeAddBuiltinCode(b, tflite.BuiltinOperator.CUSTOM)
    tflite.OperatorCodeAddCustomCode(b, code_name)
    tflite.OperatorCodeAddVersion(b, 1)
    code = tflite.OperatorCodeEnd(b)
    data = _vector(b, tflite.BufferStartDataVector, list(anchors_q.astype(np.uint8).ravel()), "uint8")
    buffers = []
    for d in (None, data):
        tflite.BufferStart(b)
        if d is not None:
            tflite.BufferAddData(b, d)
        buffers.append(tflite.BufferEnd(b))
    codes_off = _vector(b, tflite.ModelStartOperatorCodesVector, [code], "uoffset")
    sgs_off = _vector(b, tflite.ModelStartSubgraphsVector, [sg], "uoffset")
    bufs_off = _vector(b, tflite.ModelStartBuffersVector, buffers, "uoffset")
    desc = b.CreateString("uint8 SSD tail")
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, codes_off)
    tflite.ModelAddSubgraphs(b, sgs_off)
    tflite.ModelAddBuffers(b, bufs_off)
    tflite.ModelAddDescription(b, desc)
    b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
    Path(path).write_bytes(b.Output())
    return Path(path)

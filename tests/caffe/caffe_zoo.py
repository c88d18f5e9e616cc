"""Deploy prototxts of well-known Caffe architectures, written out as users have them.

SqueezeNet v1.1 (fire modules, ceil-mode pooling, global average pooling),
MobileNet v1 (depthwise convolutions, each followed by in-place BatchNorm + Scale
+ ReLU), a VGG-style net with LRN and Dropout, and an SSD-style detection head
(Permute / Flatten / Concat / Reshape / Softmax). Channel counts and input sizes
are reduced where the architecture allows, to keep the tests fast.
"""


def _input_layer(name, shape):
    dims = " ".join(f"dim: {d}" for d in shape)
    return f'layer {{ name: "{name}" type: "Input" top: "{name}" input_param {{ shape {{ {dims} }} }} }}\n'


def _conv(name, bottom, out, kernel, stride=1, pad=0, group=1, bias=True, top=None):
    return (f'layer {{ name: "{name}" type: "Convolution" bottom: "{bottom}" top: "{top or name}"\n'
            f'  param {{ lr_mult: 1 decay_mult: 1 }}\n'
            f'  convolution_param {{ num_output: {out} kernel_size: {kernel} stride: {stride} pad: {pad}'
            f'{f" group: {group}" if group > 1 else ""}{"" if bias else " bias_term: false"}\n'
            f'    weight_filler {{ type: "xavier" }} }} }}\n')


def _relu(name, blob):
    return f'layer {{ name: "{name}" type: "ReLU" bottom: "{blob}" top: "{blob}" }}\n'


def _pool(name, bottom, pool, kernel=None, stride=1, pad=0, top=None):
    size = "global_pooling: true" if kernel is None else f"kernel_size: {kernel} stride: {stride} pad: {pad}"
    return (f'layer {{ name: "{name}" type: "Pooling" bottom: "{bottom}" top: "{top or name}"\n'
            f'  pooling_param {{ pool: {pool} {size} }} }}\n')


def _fire(n, bottom, squeeze, expand):
    f = f"fire{n}"
    return (_conv(f"{f}/squeeze1x1", bottom, squeeze, 1) + _relu(f"{f}/relu_squeeze1x1", f"{f}/squeeze1x1")
            + _conv(f"{f}/expand1x1", f"{f}/squeeze1x1", expand, 1)
            + _relu(f"{f}/relu_expand1x1", f"{f}/expand1x1")
            + _conv(f"{f}/expand3x3", f"{f}/squeeze1x1", expand, 3, pad=1)
            + _relu(f"{f}/relu_expand3x3", f"{f}/expand3x3")
            + f'layer {{ name: "{f}/concat" type: "Concat" bottom: "{f}/expand1x1" '
              f'bottom: "{f}/expand3x3" top: "{f}/concat" }}\n')


def squeezenet_v11(size=227, classes=1000) -> str:
    text = 'name: "SqueezeNet_v1.1"\n' + _input_layer("data", [1, 3, size, size])
    text += _conv("conv1", "data", 64, 3, stride=2) + _relu("relu_conv1", "conv1")
    text += _pool("pool1", "conv1", "MAX", 3, 2)
    text += _fire(2, "pool1", 16, 64) + _fire(3, "fire2/concat", 16, 64)
    text += _pool("pool3", "fire3/concat", "MAX", 3, 2)
    text += _fire(4, "pool3", 32, 128) + _fire(5, "fire4/concat", 32, 128)
    text += _pool("pool5", "fire5/concat", "MAX", 3, 2)
    text += (_fire(6, "pool5", 48, 192) + _fire(7, "fire6/concat", 48, 192)
             + _fire(8, "fire7/concat", 64, 256) + _fire(9, "fire8/concat", 64, 256))
    text += ('layer { name: "drop9" type: "Dropout" bottom: "fire9/concat" top: "fire9/concat"\n'
             '  dropout_param { dropout_ratio: 0.5 } }\n')
    text += _conv("conv10", "fire9/concat", classes, 1) + _relu("relu_conv10", "conv10")
    text += _pool("pool10", "conv10", "AVE")
    text += 'layer { name: "prob" type: "Softmax" bottom: "pool10" top: "prob" }\n'
    return text


def _bn_scale_relu(name, blob, relu):
    return (f'layer {{ name: "{name}/bn" type: "BatchNorm" bottom: "{blob}" top: "{blob}"\n'
            f'  param {{ lr_mult: 0 }} param {{ lr_mult: 0 }} param {{ lr_mult: 0 }}\n'
            f'  batch_norm_param {{ use_global_stats: true eps: 1e-5 }} }}\n'
            f'layer {{ name: "{name}/scale" type: "Scale" bottom: "{blob}" top: "{blob}"\n'
            f'  scale_param {{ filler {{ value: 1 }} bias_term: true bias_filler {{ value: 0 }} }} }}\n'
            + _relu(relu, blob))


MOBILENET_BLOCKS = [("2_1", 64, 1), ("2_2", 128, 2), ("3_1", 128, 1), ("3_2", 256, 2), ("4_1", 256, 1),
                    ("4_2", 512, 2), ("5_1", 512, 1), ("5_2", 512, 1), ("5_3", 512, 1), ("5_4", 512, 1),
                    ("5_5", 512, 1), ("5_6", 1024, 2), ("6", 1024, 1)]


def mobilenet_v1(size=64, alpha=0.25, classes=1000) -> str:
    width = lambda c: max(8, int(c * alpha))  # noqa: E731 - the width multiplier
    text = 'name: "MobileNet"\n' + _input_layer("data", [1, 3, size, size])
    text += _conv("conv1", "data", width(32), 3, stride=2, pad=1, bias=False)
    text += _bn_scale_relu("conv1", "conv1", "relu1")
    prev, channels = "conv1", width(32)
    for tag, out, stride in MOBILENET_BLOCKS:
        dw, sep = f"conv{tag}/dw", f"conv{tag}/sep"
        text += _conv(dw, prev, channels, 3, stride=stride, pad=1, group=channels, bias=False)
        text += _bn_scale_relu(dw, dw, f"relu{tag}/dw")
        text += _conv(sep, dw, width(out), 1, bias=False) + _bn_scale_relu(sep, sep, f"relu{tag}/sep")
        prev, channels = sep, width(out)
    text += _pool("pool6", prev, "AVE")
    text += _conv("fc7", "pool6", classes, 1)
    text += 'layer { name: "prob" type: "Softmax" bottom: "fc7" top: "prob" }\n'
    return text


def _fc(name, bottom, out):
    return (f'layer {{ name: "{name}" type: "InnerProduct" bottom: "{bottom}" top: "{name}"\n'
            f'  inner_product_param {{ num_output: {out} }} }}\n')


def _dropout(name, blob):
    return (f'layer {{ name: "{name}" type: "Dropout" bottom: "{blob}" top: "{blob}" '
            f'dropout_param {{ dropout_ratio: 0.5 }} }}\n')


def vgg_lrn(size=64, classes=100) -> str:
    """VGG_CNN_S-like: 7x7/2 conv, LRN, 3x3/3 ceil pooling, 3x3 conv stack, three FC layers.
    Declares its input the pre-Input-layer way (input + input_dim)."""
    text = 'name: "VGG_CNN_S"\ninput: "data"\n' + "".join(f"input_dim: {d}\n" for d in (1, 3, size, size))
    text += _conv("conv1", "data", 32, 7, stride=2) + _relu("relu1", "conv1")
    text += ('layer { name: "norm1" type: "LRN" bottom: "conv1" top: "norm1"\n'
             '  lrn_param { local_size: 5 alpha: 0.0005 beta: 0.75 k: 2 } }\n')
    text += _pool("pool1", "norm1", "MAX", 3, 3)
    text += _conv("conv2", "pool1", 64, 5, pad=1) + _relu("relu2", "conv2")
    text += _pool("pool2", "conv2", "MAX", 2, 2)
    for i in (3, 4, 5):
        text += _conv(f"conv{i}", "pool2" if i == 3 else f"conv{i - 1}", 96, 3, pad=1)
        text += _relu(f"relu{i}", f"conv{i}")
    text += _pool("pool5", "conv5", "MAX", 3, 3)
    text += _fc("fc6", "pool5", 256) + _relu("relu6", "fc6") + _dropout("drop6", "fc6")
    text += _fc("fc7", "fc6", 256) + _relu("relu7", "fc7") + _dropout("drop7", "fc7")
    text += _fc("fc8", "fc7", classes)
    text += 'layer { name: "prob" type: "Softmax" bottom: "fc8" top: "prob" }\n'
    return text


def _head(source, priors, classes):
    text = ""
    for kind, per_prior in (("loc", 4), ("conf", classes)):
        name = f"{source}_mbox_{kind}"
        text += _conv(name, source, priors * per_prior, 3, pad=1)
        text += (f'layer {{ name: "{name}_perm" type: "Permute" bottom: "{name}" top: "{name}_perm"\n'
                 f'  permute_param {{ order: 0 order: 2 order: 3 order: 1 }} }}\n'
                 f'layer {{ name: "{name}_flat" type: "Flatten" bottom: "{name}_perm" '
                 f'top: "{name}_flat" flatten_param {{ axis: 1 }} }}\n')
    return text


def ssd_head(size=64, classes=5) -> str:
    """A small SSD: two source feature maps, loc / conf heads up to the layers before
    PriorBox / DetectionOutput. Declares its input as input + input_shape."""
    text = (f'name: "SSD_head"\ninput: "data"\ninput_shape {{ dim: 1 dim: 3 dim: {size} dim: {size} }}\n')
    text += _conv("conv1", "data", 16, 3, stride=2, pad=1) + _relu("relu1", "conv1")
    text += _conv("conv2", "conv1", 32, 3, stride=2, pad=1) + _relu("relu2", "conv2")
    text += _pool("pool2", "conv2", "MAX", 3, 2, pad=1)
    text += _conv("conv3", "pool2", 64, 3, pad=1) + _relu("relu3", "conv3")
    sources = [("conv2", 4), ("conv3", 6)]
    for source, priors in sources:
        text += _head(source, priors, classes)
    for kind in ("loc", "conf"):
        bottoms = " ".join(f'bottom: "{s}_mbox_{kind}_flat"' for s, _ in sources)
        text += (f'layer {{ name: "mbox_{kind}" type: "Concat" {bottoms} top: "mbox_{kind}" '
                 f'concat_param {{ axis: 1 }} }}\n')
    text += (f'layer {{ name: "mbox_conf_reshape" type: "Reshape" bottom: "mbox_conf" '
             f'top: "mbox_conf_reshape" reshape_param {{ shape {{ dim: 0 dim: -1 dim: {classes} }} }} }}\n'
             'layer { name: "mbox_conf_softmax" type: "Softmax" bottom: "mbox_conf_reshape" '
             'top: "mbox_conf_softmax" softmax_param { axis: 2 } }\n'
             'layer { name: "mbox_conf_flatten" type: "Flatten" bottom: "mbox_conf_softmax" '
             'top: "mbox_conf_flatten" flatten_param { axis: 1 } }\n')
    return text


def _prior_box(source, min_size, max_size, ratios, step=None):
    ars = " ".join(f"aspect_ratio: {r}" for r in ratios)
    step_text = f" step: {step}" if step else ""
    return (f'layer {{ name: "{source}_mbox_priorbox" type: "PriorBox" bottom: "{source}" '
            f'bottom: "data" top: "{source}_mbox_priorbox"\n'
            f'  prior_box_param {{ min_size: {min_size} max_size: {max_size} {ars} flip: true '
            f'clip: false variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2{step_text} '
            f'offset: 0.5 }} }}\n')


def ssd(size=64, classes=4, keep_top_k=50, threshold=0.05) -> str:
    """A small complete SSD as the SSD fork writes deploy files: a Normalize'd first source
    (conv4_3_norm's role), two heads of loc / conf convs with Permute + Flatten, PriorBox
    per source, Concat, the conf Reshape / Softmax / Flatten, and DetectionOutput."""
    text = (f'name: "SSD"\ninput: "data"\ninput_shape {{ dim: 1 dim: 3 dim: {size} dim: {size} }}\n')
    text += _conv("conv1", "data", 16, 3, stride=2, pad=1) + _relu("relu1", "conv1")
    text += _conv("conv2", "conv1", 32, 3, stride=2, pad=1) + _relu("relu2", "conv2")
    text += ('layer { name: "conv2_norm" type: "Normalize" bottom: "conv2" top: "conv2_norm"\n'
             '  norm_param { across_spatial: false scale_filler { type: "constant" value: 20 } '
             'channel_shared: false } }\n')
    text += _conv("conv3", "conv2", 32, 3, stride=2, pad=1) + _relu("relu3", "conv3")
    sources = [("conv2_norm", 4, (size // 8, size // 4, [2])), ("conv3", 6, (size // 4, size // 2, [2, 3]))]
    for source, priors, (lo, hi, ratios) in sources:
        text += _head(source, priors, classes) + _prior_box(source, lo, hi, ratios)
    for kind, axis in (("loc", 1), ("conf", 1), ("priorbox", 2)):
        suffix = "" if kind == "priorbox" else "_flat"
        bottoms = " ".join(f'bottom: "{s}_mbox_{kind}{suffix}"' for s, _, _ in sources)
        text += (f'layer {{ name: "mbox_{kind}" type: "Concat" {bottoms} top: "mbox_{kind}" '
                 f'concat_param {{ axis: {axis} }} }}\n')
    text += (f'layer {{ name: "mbox_conf_reshape" type: "Reshape" bottom: "mbox_conf" '
             f'top: "mbox_conf_reshape" reshape_param {{ shape {{ dim: 0 dim: -1 dim: {classes} }} }} }}\n'
             'layer { name: "mbox_conf_softmax" type: "Softmax" bottom: "mbox_conf_reshape" '
             'top: "mbox_conf_softmax" softmax_param { axis: 2 } }\n'
             'layer { name: "mbox_conf_flatten" type: "Flatten" bottom: "mbox_conf_softmax" '
             'top: "mbox_conf_flatten" flatten_param { axis: 1 } }\n')
    text += ('layer { name: "detection_out" type: "DetectionOutput" bottom: "mbox_loc" '
             'bottom: "mbox_conf_flatten" bottom: "mbox_priorbox" top: "detection_out"\n'
             f'  include {{ phase: TEST }}\n  detection_output_param {{ num_classes: {classes} '
             'share_location: true background_label_id: 0\n'
             '    nms_param { nms_threshold: 0.45 top_k: 100 }\n'
             f'    code_type: CENTER_SIZE keep_top_k: {keep_top_k} confidence_threshold: {threshold} }} }}\n')
    return text

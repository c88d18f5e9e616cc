"""Moving tensors between host arrays and images, through the OpenCL kernels of
buffer_transform.cl (never a numpy reshuffle): a host array is copied into a
device buffer as it is, and a kernel writes the image in the layout's pixel
order (and back).

Layouts (docs/gpu.md): "nhwc" channel-major activations, "hm" height-major,
"filter" conv filter OIHW, "dw_filter" depthwise filter MIHW, "arg" 1-D argument.
"""
from __future__ import annotations

import numpy as np

from mace.ops.gpu import images

# layout -> (to-image kernel, to-buffer kernel, 4-D dims of the array, image size)
LAYOUTS = {
    "nhwc": ("nhwc_to_image", "image_to_nhwc", images.as_nhwc, images.channel_major_size),
    "hm": ("nhwc_to_image_hm", "image_hm_to_nhwc", images.as_nhwc, images.height_major_size),
    "filter": ("filter_to_image", "image_to_filter", tuple, images.conv_filter_size),
    "dw_filter": ("dw_filter_to_image", "image_to_dw_filter", tuple, images.dw_filter_size),
    "arg": ("arg_to_image", "image_to_arg", lambda s: (int(np.prod(s, dtype=np.int64)),),
            lambda dims: images.arg_size(dims[0])),
}


def image_size(layout: str, shape) -> tuple:
    _, _, dims, size = LAYOUTS[layout]
    return size(dims(shape))


def _dims(layout: str, shape) -> tuple:
    return LAYOUTS[layout][2](tuple(shape))


class Transfer:
    """One host <-> image copy for a fixed tensor: the staging buffer and kernel are made once."""

    def __init__(self, runtime, layout: str, shape, image, to_image: bool, fp32: bool = False):
        cl = runtime.cl
        self.runtime, self.image, self.to_image = runtime, image, to_image
        self.shape = tuple(shape)
        nbytes = max(int(np.prod(self.shape, dtype=np.int64)), 1) * 4
        self.buffer = cl.Buffer(runtime.context, cl.mem_flags.READ_WRITE, nbytes)
        name = LAYOUTS[layout][0 if to_image else 1]
        # a float image takes the float build's transform: the half build clamps at +-65504
        self.kernel = runtime.kernel("buffer_transform", name, fp32)
        dims = [np.int32(d) for d in _dims(layout, shape)]
        args = (self.buffer, image) if to_image else (image, self.buffer)
        self.kernel.set_args(*args, *dims)
        self.gws = image_size(layout, shape)
        self.name = name

    def upload(self, host: np.ndarray) -> None:
        # Blocking: the host array is an arena view that later ops may overwrite.
        data = np.ascontiguousarray(host, dtype=np.float32)
        self.runtime.cl.enqueue_copy(self.runtime.queue, self.buffer, data, is_blocking=True)
        self.runtime.launch(self.kernel, self.name, self.gws)

    def download(self, host: np.ndarray) -> None:
        self.runtime.launch(self.kernel, self.name, self.gws)
        if host.dtype == np.float32 and host.flags.c_contiguous:
            self.runtime.cl.enqueue_copy(self.runtime.queue, host, self.buffer, is_blocking=True)
        else:
            tmp = np.empty(host.shape, np.float32)
            self.runtime.cl.enqueue_copy(self.runtime.queue, tmp, self.buffer, is_blocking=True)
            np.copyto(host, tmp, casting="unsafe")


def upload_const(runtime, array: np.ndarray, layout: str, fp32: bool = False):
    """A new image holding `array` in `layout` (weights, biases, constant operands)."""
    array = np.ascontiguousarray(array, dtype=np.float32)
    image = runtime.new_image(*image_size(layout, array.shape), fp32)
    Transfer(runtime, layout, array.shape, image, to_image=True, fp32=fp32).upload(array)
    return image


def download_image(runtime, image, layout: str, shape) -> np.ndarray:
    """The array an image holds (tests and debugging)."""
    out = np.empty(tuple(shape), np.float32)
    Transfer(runtime, layout, shape, image, to_image=False).download(out)
    return out

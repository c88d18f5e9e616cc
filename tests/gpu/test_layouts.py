"""Buffer <-> image transforms (OpenCL kernels) for every layout of MACE's tables, odd sizes.

Each layout is checked twice: the image holds exactly the pixels the seed's coordinate
table says (a numpy oracle written from the table, read back raw), and image -> buffer
gives the array back.
"""
import numpy as np
import pytest

from mace.runtime.gpu.device import GpuDevice
from mace.ops.gpu.images import cdiv
from mace.runtime.gpu.transfer import image_size, upload_const, download_image

HALF_EPS = 1e-3   # relative rounding of a float to half (2^-11), with margin


def expected_pixels(layout, a):
    """Image [height, width, 4] per the tables (x = i / m, y = j / n of P[i, j] / P[m, n])."""
    if layout in ("nhwc", "hm"):
        n, h, w, c = a.shape if a.ndim == 4 else (a.shape[0], 1, 1, a.shape[1])
        a4 = a.reshape(n, h, w, c)
    if layout == "nhwc":      # P[i, j] = E[j / H, j % H, i % W, i / W * 4 + k]
        img = np.zeros((n * h, w * cdiv(c, 4), 4), np.float32)
        for i in range(img.shape[1]):
            for j in range(img.shape[0]):
                for k in range(4):
                    if i // w * 4 + k < c:
                        img[j, i, k] = a4[j // h, j % h, i % w, i // w * 4 + k]
        return img
    if layout == "hm":        # P[i, j] = E[j / HB, j % HB * 4 + k, i % W, i / W]
        hb = cdiv(h, 4)
        img = np.zeros((n * hb, w * c, 4), np.float32)
        for i in range(img.shape[1]):
            for j in range(img.shape[0]):
                for k in range(4):
                    if j % hb * 4 + k < h:
                        img[j, i, k] = a4[j // hb, j % hb * 4 + k, i % w, i // w]
        return img
    if layout == "filter":    # P[m, n] = E[n / HW * 4 + k, m, T / W, T % W], T = n % HW
        o, i_, h, w = a.shape
        img = np.zeros((cdiv(o, 4) * h * w, i_, 4), np.float32)
        for m in range(i_):
            for nn in range(img.shape[0]):
                t = nn % (h * w)
                for k in range(4):
                    if nn // (h * w) * 4 + k < o:
                        img[nn, m, k] = a[nn // (h * w) * 4 + k, m, t // w, t % w]
        return img
    if layout == "dw_filter":  # P[m, n] = E[0, n * 4 + k, m / W, m % W]
        _, i_, h, w = a.shape
        img = np.zeros((cdiv(i_, 4), h * w, 4), np.float32)
        for m in range(h * w):
            for nn in range(img.shape[0]):
                for k in range(4):
                    if nn * 4 + k < i_:
                        img[nn, m, k] = a[0, nn * 4 + k, m // w, m % w]
        return img
    img = np.zeros((1, cdiv(a.size, 4), 4), np.float32)  # arg: P[i, 0] = E[i * 4 + k]
    img.reshape(-1)[:a.size] = a
    return img


def raw_image(dev, image, layout, shape):
    w, h = image_size(layout, shape)
    out = np.empty((h, w, 4), np.float32 if not dev.fp16 else np.float16)
    dev.cl.enqueue_copy(dev.queue, out, image, origin=(0, 0), region=(w, h), is_blocking=True)
    return out.astype(np.float32)


CASES = [("nhwc", (2, 3, 5, 7)), ("nhwc", (1, 1, 1, 1)), ("nhwc", (3, 5)), ("nhwc", (1, 4, 3, 8)),
         ("hm", (2, 5, 3, 6)), ("hm", (1, 3, 2, 1)), ("filter", (5, 3, 3, 2)), ("filter", (8, 9, 1, 1)),
         ("dw_filter", (1, 7, 3, 3)), ("dw_filter", (1, 5, 5, 1)), ("arg", (9,)), ("arg", (4,))]


@pytest.fixture(scope="module", params=["fp32_fp32", "fp16_fp32"])
def device(request):
    return GpuDevice(request.param)


@pytest.mark.parametrize("layout,shape", CASES)
def test_layout_round_trip(device, layout, shape):
    a = np.random.default_rng(len(shape) * 7 + sum(shape)).standard_normal(shape).astype(np.float32)
    image = upload_const(device, a, layout)
    want = expected_pixels(layout, a)
    got = raw_image(device, image, layout, shape)
    tol = HALF_EPS if device.fp16 else 0.0
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    back = download_image(device, image, layout, shape)
    np.testing.assert_allclose(back, a, rtol=tol, atol=tol)

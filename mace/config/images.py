"""JPEG/PNG files as model inputs: the `image_preprocess` key and the decoding it declares.

A deployment file says once, per input, how a photograph becomes that input's tensor
(docs/deployment_file.md, "Images as inputs"):

    decode (Pillow) -> channel order (RGB, BGR or GRAY) -> resize (or letterbox) -> center crop
    to the input's H x W -> (pixel - mean) / std * scale -> layout (NHWC or NCHW) -> the input's dtype

Pixels are 0..255 before `mean`; `mean` and `std` are given in the channel order asked for.
`resize: N` scales the shorter side to N (aspect kept), `resize: H,W` to exactly that; without
`resize` the image is scaled to the input's H x W. The crop's offsets are floor((size - crop) / 2).
`letterbox: V` (YOLO detectors' input) instead fits the whole image inside the box (`resize: H,W`,
default the input's H x W), aspect kept, centred, the rest filled with pixel value V (114 for
`true`): Ultralytics' LetterBox geometry (letterbox_geometry).
Pillow is an optional extra (the `images` extra: mace.util.invocation.install_hint says how to
install it from where the user stands), imported when an image is read.
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from mace.util.regular_file import NotRegularFile, open_regular
from mace.errors import ConfigError, RuntimeInputError
from mace.util.invocation import install_hint

log = logging.getLogger("mace.images")   # what each file was read as: --vlog_level 1
SUFFIXES = (".jpg", ".jpeg", ".png")
ALL_INPUTS = "*"        # the parsed key's name for "one declaration for every input"
RESAMPLE = ("bilinear", "nearest", "bicubic", "lanczos", "box", "hamming")
ORDERS = {"RGB": 3, "BGR": 3, "GRAY": 1}
SPEC_KEYS = ("resize", "letterbox", "resample", "channel_order", "mean", "std", "scale", "layout")
LETTERBOX_FILL = 114.0   # `letterbox: true`: Ultralytics' (and YOLOv5's) gray


@dataclass(frozen=True)
class ImagePreprocess:
    resize: tuple = ()               # () exact input size, (n,) shorter side, (h, w) exact
    resample: str = "bilinear"
    channel_order: str = "RGB"
    mean: tuple = (0.0,)             # one value, or one per channel
    std: tuple = (1.0,)
    scale: float = 1.0
    layout: str = ""                 # NHWC | NCHW; "" = the input's input_data_formats
    letterbox: tuple | None = None   # None: no letterbox; else the fill, one value or one per channel


def is_image(path) -> bool:
    return Path(str(path)).suffix.lower() in SUFFIXES


# ---- the deployment-file key -------------------------------------------------------------
def _numbers(v, what: str) -> tuple:
    items = v if isinstance(v, list) else str(v).split(",")
    try:
        out = tuple(float(x) for x in items)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: expected a number or a list of numbers, got {v!r}") from None
    if not out or any(not np.isfinite(x) for x in out):
        raise ValueError(f"{what}: expected finite numbers, got {v!r}")
    return out


MAX_SIDE = 16384          # a resize target side; Pillow's own decoder guard allows ~9460 x 9460
MAX_PIXELS = 1 << 28      # a resized image: 256 M pixels, 3 GiB as float32 RGB


def _sizes(v) -> tuple:
    items = v if isinstance(v, list) else str(v).split(",")
    try:
        out = tuple(int(str(x).strip()) for x in items)
    except ValueError:
        raise ValueError(f"resize: expected N (shorter side) or H,W, got {v!r}") from None
    if len(out) not in (1, 2) or min(out) < 1:
        raise ValueError(f"resize: expected N (shorter side) or H,W of positive sizes, got {v!r}")
    if max(out) > MAX_SIDE:
        raise ValueError(f"resize: {max(out)} is more than {MAX_SIDE} pixels a side")
    return out


def _check_arithmetic(mean: tuple, std: tuple, scale: float) -> None:
    """std and scale positive, and the pixels 0..255 still finite, distinct numbers in float32 after
    (pixel - mean) / std * scale: a mean of 1e308 or a std of 1e-45 makes every value inf, a scale
    of 1e-45 leaves denormals, and a negative std or scale inverts the image (no model wants that)."""
    if min(std) <= 0 or scale <= 0:
        raise ValueError("std and scale must be positive")
    if min(*std, scale) < np.finfo(np.float32).tiny:   # a denormal: no precision left
        raise ValueError(f"std {list(std)} and scale {scale}: below float32's smallest normal number "
                         f"({np.finfo(np.float32).tiny:g}): not finite, distinct values")
    f32 = np.float32
    with np.errstate(all="ignore"):
        ends = [(f32(p) - f32(m)) / f32(s) * f32(scale) for m in mean for s in std for p in (0, 255)]
    if not all(np.isfinite(ends)) or any(ends[i] == ends[i + 1] for i in range(0, len(ends), 2)):
        raise ValueError(f"mean {list(mean)}, std {list(std)}, scale {scale} turn the pixels 0..255 into "
                         f"{ends[0]:g}..{ends[1]:g} in float32: not finite, distinct values")


def _one(raw, name: str) -> ImagePreprocess:
    where = f"{name}: " if name != ALL_INPUTS else ""
    if not isinstance(raw, dict):
        raise ValueError(f"{where}expected a mapping of {', '.join(SPEC_KEYS)}, got {raw!r}")
    unknown = [str(k) for k in raw if k not in SPEC_KEYS]
    if unknown:
        raise ValueError(f"{where}unknown key(s) {', '.join(unknown)}; keys: {', '.join(SPEC_KEYS)}")
    order = str(raw.get("channel_order", "RGB")).strip().upper()
    if order not in ORDERS:
        raise ValueError(f"{where}channel_order: expected RGB, BGR or GRAY, got {raw['channel_order']!r}")
    resample = str(raw.get("resample", "bilinear")).strip().lower()
    if resample not in RESAMPLE:
        raise ValueError(f"{where}resample: expected one of {', '.join(RESAMPLE)}, got {raw['resample']!r}")
    layout = str(raw.get("layout", "")).strip().upper()
    if layout not in ("", "NHWC", "NCHW"):
        raise ValueError(f"{where}layout: expected NHWC or NCHW, got {raw['layout']!r}")
    try:
        mean = _numbers(raw.get("mean", 0), "mean")
        std = _numbers(raw.get("std", 1), "std")
        scale = _numbers(raw.get("scale", 1), "scale")
        resize = _sizes(raw["resize"]) if raw.get("resize") is not None else ()
    except ValueError as e:
        raise ValueError(f"{where}{e}") from None
    try:
        letterbox = _letterbox(raw.get("letterbox"), resize)
    except ValueError as e:
        raise ValueError(f"{where}letterbox: {e}") from None
    for key, values in (("mean", mean), ("std", std), ("letterbox", letterbox or ())):
        if values and len(values) not in (1, ORDERS[order]):
            raise ValueError(f"{where}{key}: {len(values)} values for {ORDERS[order]} channel(s) ({order})")
    if len(scale) != 1:
        raise ValueError(f"{where}scale: one number, got {len(scale)}")
    try:
        _check_arithmetic(mean, std, scale[0])
    except ValueError as e:
        raise ValueError(f"{where}{e}") from None
    return ImagePreprocess(resize, resample, order, mean, std, scale[0], layout, letterbox)


def _letterbox(v, resize: tuple):
    """The `letterbox` value: None (off: absent, null or false), or the fill on the 0..255 pixel
    scale (`true`: 114), one number or one per channel of channel_order."""
    if v is None or v is False:
        return None
    if isinstance(v, str) and v.strip().lower() in ("false", "no", "off", "true", "yes", "on"):
        v = v.strip().lower() in ("true", "yes", "on")   # YAML 1.1 words given quoted
        if not v:
            return None
    fill = (LETTERBOX_FILL,) if v is True else _numbers(v, "the fill")
    if any(not 0 <= x <= 255 for x in fill):
        raise ValueError(f"the fill is a pixel value 0..255 (before mean and std), got {v!r}")
    if len(resize) == 1:
        raise ValueError(f"fits the image inside an H,W box: give `resize: H,W` (or no resize: the "
                         f"input's H x W), not resize {resize[0]} (the shorter side)")
    return fill


def parse_image_preprocess(v) -> dict:
    """The `image_preprocess` key: one mapping of SPEC_KEYS for every input, or
    `{input name: mapping}` -> {name or ALL_INPUTS: every SPEC_KEY with its value}, plain data
    (what `config` shows and --json writes; for_input makes the ImagePreprocess)."""
    if v is None:
        return {}
    if not isinstance(v, dict) or not v:
        raise ValueError(f"expected a mapping ({', '.join(SPEC_KEYS)}), or input name -> such a mapping; "
                         f"got {v!r}")
    if any(k in SPEC_KEYS for k in v):
        return {ALL_INPUTS: _plain(_one(v, ALL_INPUTS))}
    return {str(name): _plain(_one(raw, str(name))) for name, raw in v.items()}


def _plain(prep: ImagePreprocess) -> dict:
    """Every key with its value; `letterbox` only when on, so a quantized build recorded before the
    key existed (convert's record of image_preprocess, config/provenance.py) is not made stale."""
    values = asdict(prep)
    if values["letterbox"] is None:
        del values["letterbox"]
    return values


def for_input(table: dict, name: str):
    """The ImagePreprocess of input `name`, or None when it takes no images."""
    table = table or {}   # None: the key is not given
    values = table.get(name) or table.get(ALL_INPUTS)
    return ImagePreprocess(**values) if values else None


# ---- decoding ----------------------------------------------------------------------------
def _pillow():
    try:
        from PIL import Image  # optional extra: only image inputs need it
    except ImportError:
        raise ConfigError(f"image inputs need Pillow: {install_hint('images')}") from None
    return Image


def geometry(spec, prep: ImagePreprocess, where: str) -> tuple:
    """(layout, batch, H, W, C) of an image input; a ConfigError when the shape cannot take images."""
    layout = prep.layout or spec.data_format
    shape = tuple(spec.shape)
    if layout not in ("NHWC", "NCHW"):
        raise ConfigError(f"{where}: input '{spec.name}' has input_data_formats {spec.data_format}: say "
                          f"`layout: NHWC` or `layout: NCHW` in its image_preprocess")
    if len(shape) not in (3, 4):
        raise ConfigError(f"{where}: input '{spec.name}' has shape {list(shape)}; an image input is "
                          f"{layout} (4-D, or 3-D without the batch)")
    batch, dims = (shape[0], shape[1:]) if len(shape) == 4 else (1, shape)
    h, w, c = dims if layout == "NHWC" else (dims[1], dims[2], dims[0])
    if c != ORDERS[prep.channel_order]:
        raise ConfigError(f"{where}: input '{spec.name}' {list(shape)} ({layout}) has {c} channel(s); "
                          f"channel_order {prep.channel_order} gives {ORDERS[prep.channel_order]}")
    return layout, batch, h, w, c


def letterbox_geometry(size: tuple, box: tuple) -> tuple:
    """(scale, (new W, new H), (left, top), (right, bottom)) of an image of `size` (W, H) fitted into
    `box` (H, W) as Ultralytics' LetterBox does it (center=True, scaleup=True, auto=False):
    scale = min(box H / H, box W / W); new = round(W * scale), round(H * scale) (Python's round,
    half to even); the padding split with top = round(dh / 2 - 0.1), that is floor(dh / 2) of the
    dh rows left over (left likewise). A box coordinate maps back to the image as
    (x - left) / scale, (y - top) / scale."""
    w, h = size
    bh, bw = box
    r = min(bh / h, bw / w)
    new_w, new_h = max(1, min(bw, int(round(w * r)))), max(1, min(bh, int(round(h * r))))
    dw, dh = (bw - new_w) / 2, (bh - new_h) / 2
    left, top = int(round(dw - 0.1)), int(round(dh - 0.1))
    return r, (new_w, new_h), (left, top), (bw - new_w - left, bh - new_h - top)


def _resized_size(size: tuple, resize: tuple, target: tuple) -> tuple:
    """(W, H) for Pillow: resize N = shorter side to N, aspect kept (rounded); H,W exact."""
    w, h = size
    if not resize:
        return target[1], target[0]
    if len(resize) == 2:
        return resize[1], resize[0]
    n = resize[0]
    return (n, max(1, round(h * n / w))) if w <= h else (max(1, round(w * n / h)), n)


def _oriented(im):
    """The picture as shown: EXIF orientation applied (a phone's portrait photo is stored sideways)."""
    from PIL import ImageOps  # optional extra, as _pillow
    return ImageOps.exif_transpose(im)


HIGH_DEPTH = {"I;16": 257.0, "I;16B": 257.0, "I;16L": 257.0, "I;16N": 257.0, "I": 257.0}


def _as_depth8(im, path, where: str):
    """Pixels on the 0..255 scale `mean` and `std` are given in. Pillow's convert() clips a 16-bit
    gray PNG (0..65535) to 0..255, so two values remain; such images are scaled (/257, as 8-bit
    255 is 16-bit 65535) into a float image instead. Other modes Pillow converts properly."""
    if im.mode not in HIGH_DEPTH:
        return im
    Image = _pillow()
    values = np.asarray(im, dtype=np.float64)
    if values.min() < 0 or values.max() > 65535:
        raise RuntimeInputError(f"{where}: {path}: 32-bit pixel values {values.min():g}..{values.max():g}; "
                                f"image inputs are 8- or 16-bit")
    return Image.fromarray((values / HIGH_DEPTH[im.mode]).astype(np.float32), mode="F")


# Pillow decodes only these: its other plugins are never offered a user's file (EPS and PDF go
# to Ghostscript, where installed, whatever the file's name says).
FORMATS = ("JPEG", "PNG")
# What a refused file is, by its first bytes, to name it in the error.
MAGIC = ((b"%!PS", "PostScript/EPS"), (b"\xc5\xd0\xd3\xc6", "EPS"), (b"%PDF", "PDF"), (b"GIF8", "GIF"),
         (b"BM", "BMP"), (b"II*\x00", "TIFF"), (b"MM\x00*", "TIFF"), (b"\x00\x00\x01\x00", "ICO"),
         (b"RIFF", "RIFF (WebP?)"), (b"\x00\x00\x00\x0cjP", "JPEG 2000"), (b"8BPS", "Photoshop"))


def _kind(head: bytes) -> str:
    return next((kind for magic, kind in MAGIC if head.startswith(magic)), "not an image format we know")


def _open(path: Path, where: str, name: str):
    Image = _pillow()
    try:
        with open_regular(path) as f:
            head = f.read(16)
            f.seek(0)
            try:
                im = Image.open(f, formats=FORMATS)
            except Image.UnidentifiedImageError:
                raise RuntimeInputError(f"{where}: {path} is not a readable JPEG/PNG image (input '{name}'): "
                                        f"its content is {_kind(head)}; image inputs are JPEG or PNG "
                                        f"files, read by content, whatever the name says") from None
            with im:
                im.load()
                return im.copy(), im.format   # a copy has no format: Pillow's own word for it
    except FileNotFoundError:
        raise RuntimeInputError(f"{where}: image {path} for input '{name}' not found") from None
    except NotRegularFile as e:
        raise RuntimeInputError(f"{where}: image {path} is {e.strerror}") from None
    except Image.DecompressionBombError as e:   # Pillow's own guard against huge images
        raise RuntimeInputError(f"{where}: {path} is refused: {e}") from None
    except (OSError, ValueError, SyntaxError) as e:  # Pillow's UnidentifiedImageError is an OSError
        raise RuntimeInputError(f"{where}: {path} is not a readable JPEG/PNG image "
                                f"({type(e).__name__}: {e})") from None


def _say_read(path, name: str, im, kind: str, where: str) -> None:
    """`where: path: PNG I;16 640x480 (16-bit, scaled by 1/257; EXIF orientation 6 applied) for
    input 'x'`: a file under another name, a rotated photo or a deep PNG is seen at --vlog_level 1."""
    if not log.isEnabledFor(logging.INFO):
        return
    done = []
    if im.mode in HIGH_DEPTH:
        done.append(f"16-bit, scaled by 1/{HIGH_DEPTH[im.mode]:g}")
    orientation = im.getexif().get(0x0112, 1)   # 0x0112: EXIF Orientation; 1 = as stored
    if orientation != 1:
        done.append(f"EXIF orientation {orientation} applied")
    extra = f" ({'; '.join(done)})" if done else ""
    log.info(f"{where}: {path}: {kind} {im.mode} {im.width}x{im.height}{extra} for input '{name}'")


def decode(path, spec, prep: ImagePreprocess, where: str) -> np.ndarray:
    """One sample of input `spec` from an image file: (H, W, C) or (C, H, W), the input's dtype."""
    layout, _, h, w, _ = geometry(spec, prep, where)
    stored, kind = _open(Path(path), where, spec.name)
    im = _as_depth8(_oriented(stored), path, where)
    _say_read(path, spec.name, stored, kind, where)
    if im.mode != "F":   # a scaled 16-bit gray image stays one float channel until after the crop
        im = im.convert("L" if prep.channel_order == "GRAY" else "RGB")
    Image = _pillow()
    box = tuple(prep.resize) if len(prep.resize) == 2 else (h, w)   # letterbox: the box it fills
    if prep.letterbox is not None:
        if box[0] * box[1] > MAX_PIXELS:
            raise RuntimeInputError(f"{where}: {path}: the letterbox {box[1]}x{box[0]} is more than "
                                    f"{MAX_PIXELS} pixels")
        scale, new, (pad_left, pad_top), _ = letterbox_geometry(im.size, box)
        log.info(f"{where}: {path}: letterbox {im.width}x{im.height} -> {new[0]}x{new[1]} (scale {scale:.6g}) "
                 f"at left {pad_left}, top {pad_top} of {box[1]}x{box[0]} for input '{spec.name}'")
    else:
        new = _resized_size(im.size, prep.resize, (h, w))
        if new[0] * new[1] > MAX_PIXELS:
            raise RuntimeInputError(f"{where}: {path} is {im.width}x{im.height}; resize {list(prep.resize)} "
                                    f"would make it {new[0]}x{new[1]}, more than {MAX_PIXELS} pixels")
    if new != im.size:
        im = im.resize(new, getattr(Image.Resampling, prep.resample.upper()))
    pixels = np.asarray(im, dtype=np.float32).reshape(im.height, im.width, -1)
    if pixels.shape[-1] != ORDERS[prep.channel_order]:   # a 16-bit gray image for an RGB input
        pixels = np.repeat(pixels, ORDERS[prep.channel_order], axis=-1)
    if prep.channel_order == "BGR":
        pixels = pixels[..., ::-1]
    if prep.letterbox is not None:   # the fill is given in channel_order, as mean is
        canvas = np.empty((box[0], box[1], pixels.shape[-1]), np.float32)
        canvas[...] = np.asarray(prep.letterbox, np.float32)
        canvas[pad_top:pad_top + new[1], pad_left:pad_left + new[0]] = pixels
        pixels = canvas
    ph, pw = pixels.shape[:2]
    if pw < w or ph < h:
        what = f": its letterbox is {pw}x{ph}" if prep.letterbox is not None else \
            f" is {pw}x{ph} after resize {list(prep.resize)}"
        raise RuntimeInputError(f"{where}: {path}{what}, smaller than input '{spec.name}' ({w}x{h}): "
                                f"resize to at least the input size")
    left, top = (pw - w) // 2, (ph - h) // 2
    pixels = pixels[top:top + h, left:left + w]
    mean = np.asarray(prep.mean, np.float32)
    std = np.asarray(prep.std, np.float32)
    value = (pixels - mean) / std * np.float32(prep.scale)
    if layout == "NCHW":
        value = value.transpose(2, 0, 1)
    return _cast(value, spec, path, where)


def _cast(value: np.ndarray, spec, path, where: str) -> np.ndarray:
    dtype = np.dtype(spec.dtype)
    if dtype.kind in "iu":   # quantized inputs take pixel values as they are; a value out of range is a mistake
        info = np.iinfo(dtype)
        value = np.rint(value)
        if value.min() < info.min or value.max() > info.max:
            raise RuntimeInputError(f"{where}: {path}: preprocessed values {value.min():g}..{value.max():g} "
                                    f"do not fit input '{spec.name}' ({spec.dtype})")
    return np.ascontiguousarray(value.astype(dtype))


def image_input(path, spec, prep: ImagePreprocess, where: str) -> np.ndarray:
    """The whole input `spec` from one image (its batch must be 1)."""
    _, batch, _, _, _ = geometry(spec, prep, where)
    if batch != 1:
        raise RuntimeInputError(f"{where}: input '{spec.name}' has a batch of {batch}; one image fills a "
                                f"batch of 1 (a folder of images gives one sample per image)")
    return decode(path, spec, prep, where).reshape(spec.shape)


def image_batch(paths, spec, prep: ImagePreprocess, where: str) -> np.ndarray:
    """Images stacked along the batch axis: len(paths) samples of input `spec`."""
    return np.stack([decode(p, spec, prep, where) for p in paths])

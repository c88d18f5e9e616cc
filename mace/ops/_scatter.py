"""What ScatterND and ScatterElements share: the `reduction` arg and the write itself."""
import numpy as np

_UFUNC = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def reduction(ctx):
    red = ctx.arg("reduction", "none")
    red = red.decode() if isinstance(red, bytes) else red
    if red != "none" and red not in _UFUNC:
        raise ValueError(f"{ctx.op.type} '{ctx.op.name}': unknown reduction {red!r}")
    return red


def write(out, where, updates, red):
    """out[where] = updates, or combined with `red` (duplicates reduce, in index order)."""
    if red == "none":
        out[where] = updates  # numpy assigns in order: the last duplicate wins, as ONNX's loop
    else:
        _UFUNC[red].at(out, where, updates)

"""Read and write OperatorDef/NetDef arguments by name with Python types."""
from __future__ import annotations

from typing import Any, Iterable

_MISSING = object()


def get_arg(op, name: str, default: Any = _MISSING) -> Any:
    """Return the value of argument `name`: int, float, str, or a list of them."""
    for a in op.arg:
        if a.name == name:
            return _value(a)
    if default is _MISSING:
        raise KeyError(f"op '{getattr(op, 'name', '?')}' has no argument '{name}'")
    return default


def _value(a) -> Any:
    if a.ints:
        return list(a.ints)
    if a.floats:
        return list(a.floats)
    if a.strings:
        return [s.decode() for s in a.strings]
    if a.HasField("s"):
        return a.s.decode()
    if a.HasField("f"):
        return a.f
    if a.HasField("i"):
        return a.i
    return []  # an explicitly empty list


def has_arg(op, name: str) -> bool:
    return any(a.name == name for a in op.arg)


def set_arg(op, name: str, value: Any) -> None:
    """Set (replace) argument `name`; the proto field follows the Python type."""
    del_arg(op, name)
    a = op.arg.add()
    a.name = name
    if isinstance(value, bool):
        a.i = int(value)
    elif isinstance(value, int):
        a.i = value
    elif isinstance(value, float):
        a.f = value
    elif isinstance(value, str):
        a.s = value.encode()
    elif isinstance(value, Iterable):
        _set_list(a, list(value))
    else:
        raise TypeError(f"unsupported argument type for '{name}': {type(value).__name__}")


def _set_list(a, values: list) -> None:
    if all(isinstance(v, str) for v in values) and values:
        a.strings.extend(v.encode() for v in values)
    elif any(isinstance(v, float) for v in values):
        a.floats.extend(float(v) for v in values)
    else:
        a.ints.extend(int(v) for v in values)


def del_arg(op, name: str) -> None:
    keep = [a for a in op.arg if a.name != name]
    if len(keep) != len(op.arg):
        del op.arg[:]
        op.arg.extend(keep)

"""Library and model names: what a deployment file may call them, and the identifiers code uses.

MACE uses `library_name` and the model keys for file and library names, so its own files say
`mobilenet-v1`, `squeezenet-v11`, `kws-tc_resnet8`. We take the same: letters, digits, '-', '_'
and '.', starting with a letter, digit or '_' (never '-', which a command line reads as a flag,
nor '.', which hides a folder or climbs out of one), no '..', at most MAX_LENGTH characters.
Such a name is safe as a folder, a file and a word in a remote shell's command line.

Where code needs a name (the generated package `<library>_models`, a model's module in it) we
derive a Python and C identifier by one documented rule, `identifier()`:
  '-' and '.' become '_'; a name starting with a digit gets a leading '_'; a Python or C++
  keyword gets a trailing '_'.
`mobilenet-v1` -> `mobilenet_v1`, `1lib` -> `_1lib`, `class` -> `class_`. Two models of one
library whose identifiers collide (`a-b` and `a_b`) are refused, naming both.
"""
from __future__ import annotations

import keyword
import re

MAX_LENGTH = 128
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
CPP_KEYWORDS = frozenset("""alignas alignof and and_eq asm auto bitand bitor bool break case catch char
char16_t char32_t class compl const constexpr const_cast continue decltype default delete do double
dynamic_cast else enum explicit export extern false float for friend goto if inline int long mutable
namespace new noexcept not not_eq nullptr operator or or_eq private protected public register
reinterpret_cast return short signed sizeof static static_assert static_cast struct switch template
this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile
wchar_t while xor xor_eq""".split())
RULE = ("letters, digits, '-', '_' and '.', starting with a letter, digit or '_', no '..', "
        f"at most {MAX_LENGTH} characters")


def check_name(value: str, what: str) -> str:
    """`value` if it is a safe library or model name, else ValueError saying what is allowed."""
    if len(value) > MAX_LENGTH:
        raise ValueError(f"{what} of {len(value)} characters is too long ({RULE})")
    if not NAME.fullmatch(value) or ".." in value:
        raise ValueError(f"{what} {value!r} is not a safe file name: use {RULE} "
                         f"(it names builds/<library_name>/ and files on devices)")
    return value


def identifier(name: str) -> str:
    """The Python / C identifier code uses for a checked name (the module docstring's rule)."""
    out = re.sub(r"[-.]", "_", name)
    if out[0].isdigit():
        out = "_" + out
    if keyword.iskeyword(out) or out in CPP_KEYWORDS:
        out += "_"
    return out


def colliding(names) -> tuple | None:
    """The first two names whose identifiers are the same, or None."""
    seen = {}
    for name in names:
        other = seen.setdefault(identifier(name), name)
        if other != name:
            return other, name
    return None

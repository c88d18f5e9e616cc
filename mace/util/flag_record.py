"""A frozen record of options that is also a command line: declared once, written by one side
(`to_argv`) and read back by the other (`add_arguments`, `from_args`) from the same fields, so the
host and the device runner cannot drift apart (issue 32).

    @dataclass(frozen=True)
    class Opts(FlagRecord):
        round: int = option(1, "timed runs after the warm-up run")
        profile: bool = option(False, "time every op")

    argv = Opts(round=5).to_argv()            # ['--round=5']
    Opts.add_arguments(parser); Opts.from_args(parser.parse_args(argv))

Each field's flag is `--<name>` (plus `aliases`); bool fields are switches; `choices` restrict a
value. Only values that differ from the default are written: the defaults are the same on both
sides by construction. Standard library only (the device runner imports it before numpy).
"""
from __future__ import annotations

from dataclasses import MISSING, field, fields

_TYPES = {"int": int, "float": float, "str": str}


def option(default, help_text: str, *aliases: str, choices=None, metavar=None):
    """A field of a FlagRecord: its default, its --help text, other flag names, allowed values."""
    return field(default=default, metadata={"help": help_text, "aliases": aliases, "choices": choices,
                                            "metavar": metavar})


class FlagRecord:
    def to_argv(self) -> list:
        """`--name=value` per field off its default (a value starting with '-' stays a value)."""
        argv = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value == f.default:
                continue
            argv += [f"--{f.name}"] if f.type == "bool" else [f"--{f.name}={value}"]
        return argv

    @classmethod
    def add_arguments(cls, group) -> None:
        """Declare every field's flag on an argparse parser or group."""
        for f in fields(cls):
            meta = f.metadata
            names = [f"--{f.name}", *meta.get("aliases", ())]
            if f.type == "bool":
                group.add_argument(*names, dest=f.name, action="store_true", help=meta.get("help"))
                continue
            kwargs = {"dest": f.name, "default": f.default if f.default is not MISSING else None,
                      "type": _TYPES[f.type], "help": meta.get("help")}
            if meta.get("choices") is not None:
                kwargs["choices"] = meta["choices"]
            if meta.get("metavar"):
                kwargs["metavar"] = meta["metavar"]
            group.add_argument(*names, **kwargs)

    @classmethod
    def from_args(cls, namespace):
        values = {f.name: getattr(namespace, f.name) for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if v is not None})

"""Write the sha256 of a file just generated into the deployment file that names it.

A script that generates a model (examples/*/make_model.py) pins the checksum of what it wrote
on this machine: TensorFlow's kernels and calibrator, a numpy training loop or any other float
computation can give other bits on another CPU or version, so a checksum made elsewhere would
not match. Only the value of the checksum key is rewritten (`model_sha256_checksum` of the model
whose `model_file_path` names the file, `weight_sha256_checksum` for a `weight_file_path`); the
comments, order and quoting of the rest of the file stay as they were.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from mace.config.fetch import is_url, sha256_of
from mace.errors import ConfigError

CHECKSUM_KEYS = {"model_file_path": "model_sha256_checksum", "weight_file_path": "weight_sha256_checksum"}


@dataclass(frozen=True)
class PinnedChecksum:
    key_path: str        # models.<name>.model_sha256_checksum
    old: str | None      # None: the key was missing and has been added
    new: str

    @property
    def changed(self) -> bool:
        return self.old != self.new

    def describe(self, why: str = "") -> str:
        """One line for a person: what changed, and `why` it did."""
        if not self.changed:
            return f"{self.key_path}: {self.new} (unchanged: the same bytes as before)"
        return f"{self.key_path}: {self.old or '(missing)'} -> {self.new}" + (f" ({why})" if why else "")


def pin_checksum(yml: Path, written: Path, digest: str | None = None, required: bool = False) -> list:
    """Set the checksum of every model entry of `yml` that names `written` to `digest` (default:
    the file's sha256); returns a PinnedChecksum per entry, [] when no entry names the file
    (a ConfigError if `required`). The file is rewritten (write, then rename) only when a value
    changes."""
    yml, written = Path(yml), Path(written)
    digest = digest or sha256_of(written)
    text = yml.read_bytes().decode()   # line endings as they are
    edits, pinned = [], []
    for key_path, found, after_path, indent, value in _checksum_slots(text, yml, written):
        if value is None:   # no checksum key yet: add one on the line after the path
            edits.append((after_path, after_path, f"{' ' * indent}{key_path.rsplit('.', 1)[1]}: {digest}\n"))
        elif found != digest:
            edits.append((value.start_mark.index, value.end_mark.index, digest))
        pinned.append(PinnedChecksum(key_path, found, digest))
    for start, end, new in sorted(set(edits), reverse=True):   # from the end: earlier offsets stay valid
        text = text[:start] + new + text[end:]
    if required and not pinned:
        raise ConfigError(f"{yml}: no model has a model_file_path or weight_file_path naming {written}")
    if edits:
        _replace(yml, text)
    return pinned


def _checksum_slots(text: str, yml: Path, written: Path):
    """(key path, current checksum or None, offset after the path's line, its indent, value node
    or None) for each model key that names `written`."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)   # nodes with their offsets in `text`
    except yaml.YAMLError as e:
        raise ConfigError(f"{yml}: invalid YAML: {e}") from None
    models = _mapping(root).get("models", (None, None))[1]
    for name, model in _mapping(models).items():
        entries = _mapping(model[1])
        for path_key, sum_key in CHECKSUM_KEYS.items():
            key, value = entries.get(path_key, (None, None))
            if not (isinstance(value, yaml.ScalarNode) and _names(value.value, written, yml)):
                continue
            key_path = f"models.{name}.{sum_key}"
            current = entries.get(sum_key, (None, None))[1]
            if current is not None and not isinstance(current, yaml.ScalarNode):
                raise ConfigError(f"{yml}: {key_path}: expected a sha256 string")
            if current is None and model[1].flow_style:
                raise ConfigError(f"{yml}: models.{name}: add {sum_key} to it (a {{...}} mapping is not edited)")
            line_end = text.find("\n", value.end_mark.index)
            after = len(text) if line_end < 0 else line_end + 1
            yield key_path, current.value if current is not None else None, after, key.start_mark.column, current


def _mapping(node) -> dict:
    """key -> (key node, value node) of a block or flow mapping; {} for anything else."""
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {k.value: (k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)}


def _names(value: str, written: Path, yml: Path) -> bool:
    """Whether a deployment file's path value names `written`. A relative path is read from the
    directory the converter runs in (or next to the .yml), which a generator does not know: it
    names the file when it is the tail of the file's path (examples/tflite/m.tflite names
    /any/checkout/examples/tflite/m.tflite)."""
    value = os.path.expandvars(value)
    if not value or is_url(value) or "$" in value:
        return False
    path, target = Path(value).expanduser(), os.path.realpath(written)
    if path.is_absolute():
        return os.path.realpath(path) == target
    if ".." not in path.parts and path.parts == Path(target).parts[-len(path.parts):]:
        return True
    return target in (os.path.realpath(path), os.path.realpath(yml.parent / path))


def _replace(path: Path, text: str) -> None:
    """Write then rename, keeping the file's permissions: a reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", newline="") as f:
            f.write(text)
        os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

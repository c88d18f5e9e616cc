"""Read a .yml the way MACE does: `${VAR}` from the environment, ON/OFF kept as text.

Uses yaml.safe_load semantics (no arbitrary objects). YAML 1.1 would turn
on/off/yes/no into booleans; MACE users write `ON`/`OFF` meaning strings, so
only true/false are booleans here.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

from mace.util.regular_file import CONFIG_LIMIT, CONFIG_LIMIT_ENV, byte_limit, read_limited
from mace.errors import ConfigError

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class _Loader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        """A key given twice is an error (YAML would silently keep the last one)."""
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor` merges, it is no key
                continue
            try:
                key = self.construct_object(key_node, deep=True)
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key '{key}'",
                                                        key_node.start_mark)
        return super().construct_mapping(node, deep)


_Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:int")]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                              list("tTfF"))
# YAML 1.1's base-60 integers (`3:5` is 185) are left out: `placement` op slices are written so.
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"),
    list("-+0123456789"))


def _in_comment(text: str, pos: int) -> bool:
    """Whether `pos` lies in a YAML comment: after a `#` that starts a line or follows a blank,
    outside quotes (a `#` inside a quoted value is text)."""
    before = text[text.rfind("\n", 0, pos) + 1:pos]
    return any(before[:m.start()].count('"') % 2 == 0 and before[:m.start()].count("'") % 2 == 0
               for m in re.finditer(r"(?:^|\s)#", before))


def substitute_env(text: str, path: Path) -> tuple:
    """Replace ${VAR}; returns (text, {var: value}) and fails naming an unset variable."""
    used = {}

    def repl(m):
        name = m.group(1)
        if _in_comment(text, m.start()):
            return m.group(0)  # `# set ${MODEL_DIR} first` documents a variable; it is not a value
        if name not in os.environ:
            line = text.count("\n", 0, m.start()) + 1
            raise ConfigError(f"{path}:{line}: environment variable ${{{name}}} is not set")
        used[name] = os.environ[name]
        return os.environ[name]

    return _ENV.sub(repl, text), used


MAX_ALIAS_NODES = 100_000   # nodes that aliases add; `<<: *defaults` in every model of a big file adds thousands


def _parse(text: str, path: Path):
    """yaml.load with _Loader, refusing aliases that expand past MAX_ALIAS_NODES before anything is
    constructed: nine aliases of nine aliases (a 1 KB 'billion laughs' file) are 9^9 nodes to every
    walk of the data (check_strings, the schema, JSON dumps of the config)."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        added = _expanded_size(node, path) - len({id(n) for n in _distinct(node)})
        if added > MAX_ALIAS_NODES:
            raise ConfigError(f"{path}: YAML aliases expand to {added} more values than written "
                              f"(at most {MAX_ALIAS_NODES}): write the values out or alias less")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _children(node) -> list:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _distinct(root) -> list:
    seen, stack, out = set(), [root], []
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen.add(id(node))
            out.append(node)
            stack += _children(node)
    return out


def _expanded_size(root, path: Path) -> int:
    """Nodes in the tree with every alias written out (each shared node counted once per use)."""
    sizes, open_ = {}, set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        if done:
            open_.discard(id(node))
            sizes[id(node)] = min(1 + sum(sizes[id(c)] for c in _children(node)), 1 << 62)
            continue
        if id(node) in open_:   # `&a [*a]`: an alias inside its own anchor
            raise ConfigError(f"{path}:{node.start_mark.line + 1}: invalid YAML: an alias refers to "
                              f"a value that contains it")
        open_.add(id(node))
        stack.append((node, True))
        stack += [(c, False) for c in _children(node) if id(c) not in sizes]
    return sizes[id(root)]


def load_yaml(path: Path) -> tuple:
    """Parse `path`; returns (data, env vars used). Errors name the file and line."""
    path = Path(path)
    try:
        limit = byte_limit(CONFIG_LIMIT_ENV, CONFIG_LIMIT)
    except ValueError as e:
        raise ConfigError(f"{path}: {e}") from None
    try:  # a regular file of bounded size: a FIFO would block, /dev/zero never end
        text = read_limited(path, limit, CONFIG_LIMIT_ENV).decode()
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not a text file ({e.reason} at byte {e.start})") from None
    text, used = substitute_env(text, path)
    try:
        data = _parse(text, path)
    except RecursionError:   # PyYAML's composer recurses once per level
        raise ConfigError(f"{path}: invalid YAML: nested too deeply") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"{path}{where}: invalid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys at the top level")
    check_strings(data, path)
    return data, used


MAX_DEPTH = 32         # the schema's deepest value is 4 levels down
MAX_STRING = 4096      # PATH_MAX: longer is no path, tensor or library name of a real model


def check_strings(data, path: Path) -> None:
    """No value nested beyond MAX_DEPTH, and no string with a NUL byte (the OS cuts paths at
    it) or beyond MAX_STRING characters (names become file names: 'File name too long')."""
    stack = [(data, "", 0)]
    while stack:
        value, key_path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ConfigError(f"{path}: {key_path}: nested too deeply (more than {MAX_DEPTH} levels)")
        if isinstance(value, dict):
            stack += [(v, f"{key_path}.{k}" if key_path else str(k), depth + 1) for k, v in value.items()]
            stack += [(k, key_path or "(top level)", depth + 1) for k in value if isinstance(k, str)]
        elif isinstance(value, list):
            stack += [(v, f"{key_path}[{i}]", depth + 1) for i, v in enumerate(value)]
        elif isinstance(value, str):
            if "\0" in value:
                raise ConfigError(f"{path}: {key_path}: contains a NUL byte")
            if len(value) > MAX_STRING:
                raise ConfigError(f"{path}: {key_path}: too long ({len(value)} characters, "
                                  f"at most {MAX_STRING})")

"""YAML with line numbers: every mapping key keeps where it was written, and duplicate keys are
errors (plain yaml.safe_load silently keeps the last one)."""
from __future__ import annotations

import yaml

from .model import Location, TableError


class Node:
    """A parsed YAML value with its location."""

    __slots__ = ("value", "loc")

    def __init__(self, value, loc: Location):
        self.value = value
        self.loc = loc


def _convert(node: yaml.Node, path: str, depth: int = 0) -> Node:
    loc = Location(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, tuple[Location, Node]] = {}
        for k, v in node.value:
            key = _convert(k, path, depth + 1)
            if not isinstance(key.value, str):
                raise TableError(key.loc, f"keys must be strings, got {key.value!r}; quote it")
            if key.value in out:
                first = out[key.value][0]
                what = "entry" if depth == 0 else "key"
                raise TableError(key.loc, f"duplicate {what} '{key.value}' (first at line {first.line}); "
                                          f"YAML would silently keep only the last one, so keep one {what}")
            out[key.value] = (key.loc, _convert(v, path, depth + 1))
        return Node(out, loc)
    if isinstance(node, yaml.SequenceNode):
        return Node([_convert(v, path, depth + 1) for v in node.value], loc)
    if node.tag == "tag:yaml.org,2002:str":
        return Node(node.value, loc)
    try:
        return Node(yaml.SafeLoader("").construct_object(node, deep=True), loc)
    except yaml.YAMLError as e:
        raise TableError(loc, f"unreadable value {node.value!r}: {getattr(e, 'problem', None) or e}") from None


# libyaml's parser when PyYAML has it (its nodes carry the same line marks): a no-op build parses
# the table and every category's ops.yaml, and the pure-Python parser took most of its time.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(path: str) -> Node:
    """Parse a YAML file; malformed YAML becomes a TableError at the offending line."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise TableError(None, f"cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise TableError(Location(path, 1), f"not UTF-8 text: {e.reason}") from None
    try:
        root = yaml.compose(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else 1
        raise TableError(Location(path, line), f"malformed YAML: {e.problem or e}") from None
    if root is None:
        return Node({}, Location(path, 1))
    return _convert(root, path)

"""Change one value in a YAML file's text, keeping everything else — comments,
key order, quoting, blank lines — byte for byte (for ``llmctl up --fix``).

PyYAML's node tree gives each scalar's exact span; a value is replaced in
place, and a missing key is added as one new line under its parent mapping,
indented like its siblings. Only block-style mappings are edited; a value
inside a flow mapping (``{a: 1}``) is refused (:class:`EditError`) rather than
rewritten in a way that could change its meaning.
"""

from __future__ import annotations

from typing import Any, Sequence

import yaml


class EditError(ValueError):
    pass


def _dump_inline(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=float("inf")).strip()
    return text[:-4].strip() if text.endswith("\n...") or text.endswith("...") else text


def _child(node: yaml.Node, key: Any):
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if k.value == str(key):
                return k, v
        return None
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        return None, node.value[key]
    return None


def set_value(text: str, path: Sequence[Any], value: Any) -> str:
    """``text`` with the value at ``path`` (keys / list indexes) set to ``value``."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if root is None or not path:
        raise EditError("empty document or path")
    node = root
    for depth, part in enumerate(path[:-1]):
        found = _child(node, part)
        if found is None:
            # create the missing parent mappings, then the value, in one block
            return _insert(text, node, list(path[depth:]), value)
        node = found[1]
    last = path[-1]
    found = _child(node, last)
    if found is None:
        return _insert(text, node, [last], value)
    _, vnode = found
    if not isinstance(vnode, yaml.ScalarNode):
        raise EditError(f"{'.'.join(map(str, path))} is not a plain value")
    if getattr(vnode, "style", None) is None and node.flow_style:
        raise EditError(f"{'.'.join(map(str, path))} is in a flow mapping")
    start, end = vnode.start_mark.index, vnode.end_mark.index
    return text[:start] + _dump_inline(value) + text[end:]


def _insert(text: str, parent: yaml.Node, keys: list[Any], value: Any) -> str:
    if not isinstance(parent, yaml.MappingNode) or parent.flow_style:
        raise EditError("can only add keys to a block mapping")
    lines = text.splitlines(keepends=True)
    if parent.value:
        first_key = parent.value[0][0]
        indent = first_key.start_mark.column
        end_line = max(v.end_mark.line - (1 if v.end_mark.column == 0 else 0) for _, v in parent.value)
        end_line = min(end_line, len(lines) - 1)
        # comment and blank lines before the next key belong to what follows
        while end_line > first_key.start_mark.line and (not lines[end_line].strip() or lines[end_line].lstrip().startswith("#")):
            end_line -= 1
        insert_at = end_line + 1
    else:
        raise EditError("cannot add a key to an empty mapping")
    block = []
    for i, k in enumerate(keys):
        pad = " " * (indent + 2 * i)
        if i == len(keys) - 1:
            block.append(f"{pad}{_dump_inline(k)}: {_dump_inline(value)}\n")
        else:
            block.append(f"{pad}{_dump_inline(k)}:\n")
    if insert_at > len(lines):
        insert_at = len(lines)
    if insert_at > 0 and not lines[insert_at - 1].endswith("\n"):
        lines[insert_at - 1] += "\n"
    return "".join(lines[:insert_at] + block + lines[insert_at:])

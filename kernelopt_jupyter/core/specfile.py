"""Reading a spec file (YAML or JSON) while remembering the line of every field.

Line numbers are what make a spec error quick to fix: "workload.yaml:14: signature[2].shape[0]"
beats a field path alone. PyYAML's node tree carries start marks; JSON is a subset of YAML in all
the ways that matter here, so both go through the same composer for line lookup.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import SpecError

FieldPath = tuple[str | int, ...]


@dataclass
class SpecDocument:
    """The parsed data of a spec file plus a map from field path to 1-based line number."""

    path: Path
    data: Any
    lines: dict[FieldPath, int] = field(default_factory=dict)

    def line_of(self, path: Sequence[str | int]) -> int | None:
        """The line of the deepest known prefix of ``path`` (a missing field points at its parent)."""
        key = tuple(path)
        while key:
            if key in self.lines:
                return self.lines[key]
            key = key[:-1]
        return self.lines.get((), None)


def read_spec_document(path: str | Path) -> SpecDocument:
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise SpecError.single(str(path), "", "file not found") from None
    except OSError as exc:
        raise SpecError.single(str(path), "", f"cannot read file ({exc.strerror})") from None
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError.single(str(path), "", f"invalid JSON: {exc.msg}", exc.lineno) from None
    else:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = mark.line + 1 if mark is not None else None
            problem = getattr(exc, "problem", None) or str(exc)
            raise SpecError.single(str(path), "", f"invalid YAML: {problem}", line) from None
    if not isinstance(data, dict):
        raise SpecError.single(str(path), "", "expected a mapping of fields at the top level", 1)
    document = SpecDocument(path, data)
    # Valid JSON that YAML cannot compose (rare) simply gives errors without line numbers.
    with contextlib.suppress(yaml.YAMLError):
        _index_lines(yaml.compose(text, Loader=yaml.SafeLoader), (), document.lines)
    return document


def _index_lines(node: yaml.Node | None, prefix: FieldPath, lines: dict[FieldPath, int]) -> None:
    if node is None:
        return
    lines.setdefault(prefix, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = str(key_node.value)
            lines[(*prefix, key)] = key_node.start_mark.line + 1
            _index_lines(value_node, (*prefix, key), lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*prefix, index)] = item.start_mark.line + 1
            _index_lines(item, (*prefix, index), lines)

"""YAML read with the line of every mapping key and list item, so that a config error can name the
line it comes from (as the .properties loader does)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from mirrorlag.errors import ConfigError


class LineMap(dict):  # type: ignore[type-arg]
    """A YAML mapping; `lines[key]` is the 1-based line of the key, `line` the mapping's own (its
    first key's), `at` the line of the key that holds it, where an error about it reads best."""

    line: int = 0
    at: int = 0
    lines: dict[Any, int]


class LineList(list):  # type: ignore[type-arg]
    """A YAML sequence; `lines[i]` is the 1-based line of item i."""

    line: int = 0
    at: int = 0
    lines: list[int]


class _Loader(yaml.SafeLoader):
    def construct_yaml_map(self, node: yaml.MappingNode) -> Any:  # type: ignore[override]
        out = LineMap()
        out.line = out.at = node.start_mark.line + 1
        out.lines = {}
        yield out
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            out[key] = value = self.construct_object(value_node, deep=True)
            out.lines[key] = key_node.start_mark.line + 1
            if isinstance(value, (LineMap, LineList)):
                value.at = out.lines[key]

    def construct_yaml_seq(self, node: yaml.SequenceNode) -> Any:  # type: ignore[override]
        out = LineList()
        out.line = out.at = node.start_mark.line + 1
        out.lines = [item.start_mark.line + 1 for item in node.value]
        yield out
        out.extend(self.construct_object(item, deep=True) for item in node.value)


_Loader.add_constructor("tag:yaml.org,2002:map", _Loader.construct_yaml_map)
_Loader.add_constructor("tag:yaml.org,2002:seq", _Loader.construct_yaml_seq)


def load_documents(file: Path) -> list[Any]:
    """Every document of a (multi-document) YAML file; a syntax error is a ConfigError at its line."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read file: {getattr(err, 'strerror', None) or err}", file=file) from None
    try:
        return [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(f"not valid YAML: {err.problem or err.context}", file=file, line=line) from None
    except yaml.YAMLError as err:
        raise ConfigError(f"not valid YAML: {err}", file=file) from None

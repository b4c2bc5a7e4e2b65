"""The fields of a Strimzi KafkaMirrorMaker2 resource, read with the YAML line each came from, and
the Secrets it names, read from files: what mirrorlag/config/strimzi.py derives the MM2 keys with."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mirrorlag.config.client import Prop
from mirrorlag.config.yaml_lines import LineList, LineMap
from mirrorlag.errors import ConfigError

DEFAULT_SECRETS_DIR = Path("/etc/mirrorlag/strimzi-secrets")


@dataclass(frozen=True)
class StrimziSource:
    """`--strimzi FILE[#NAME]`: which resource, and where its Secrets are mounted."""

    file: Path
    name: str | None = None  # metadata.name, to pick one of several resources in the file
    secrets_dir: Path = DEFAULT_SECRETS_DIR

    @classmethod
    def parse(cls, text: str, secrets_dir: Path | None = None) -> StrimziSource:
        path, _, name = text.rpartition("#") if "#" in text else (text, "", "")
        return cls(Path(path).resolve(), name or None, secrets_dir or DEFAULT_SECRETS_DIR)


@dataclass
class ResourceReader:
    """Reads one resource's fields and Secrets, and collects the MM2 keys derived from them."""

    source: StrimziSource
    props: dict[str, Prop] = field(default_factory=dict)

    @property
    def file(self) -> Path:
        return self.source.file

    def fail(self, line: int | None, where: str | None, message: str) -> ConfigError:
        return ConfigError(message, self.file, line, where)

    def put(self, key: str, value: Any, line: int, where: str) -> None:
        # The key as written names the resource's field and the MM2 key it became, so that an
        # error reads as both (and a secret's stays recognisable to settings.is_secret_key).
        self.props[key] = Prop(text(value), self.file, line, f"{where} ({key})")

    # --- structure -------------------------------------------------------------------------

    def value(self, parent: LineMap, key: str, where: str, required: bool) -> Any:
        value = parent.get(key)
        if value is None and required:
            raise self.fail(parent.at, where.rpartition(".")[0] or where, f"{key} is required")
        return value

    def mapping(self, parent: LineMap, key: str, where: str, required: bool = True) -> LineMap | None:
        value = self.value(parent, key, where, required)
        if value is not None and not isinstance(value, LineMap):
            raise self.fail(parent.lines[key], where, "expected a mapping")
        return value

    def string(self, parent: LineMap, key: str, where: str, required: bool = True) -> str | None:
        value = self.value(parent, key, where, required)
        if value is None:
            return None
        if isinstance(value, (LineMap, LineList)) or str(value).strip() == "":
            raise self.fail(parent.lines[key], where, "expected a non-empty string")
        return str(value)

    def items(self, parent: LineMap, key: str, where: str) -> list[tuple[LineMap, int, str]]:
        value = parent.get(key)
        if value is None:
            return []
        if not isinstance(value, LineList):
            raise self.fail(parent.lines[key], where, "expected a list")
        out = []
        for i, item in enumerate(value):
            if not isinstance(item, LineMap):
                raise self.fail(value.lines[i], f"{where}[{i}]", "expected a mapping")
            out.append((item, value.lines[i], f"{where}[{i}]"))
        return out

    # --- Secrets, as files ---------------------------------------------------------------

    def secret_file(self, secret: str, key: str, line: int, where: str) -> str:
        path = self.source.secrets_dir / secret / key
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise self.fail(line, where, f"cannot read {path} ({getattr(err, 'strerror', None) or err}): mount "
                                         f"the Secret {secret} at {path.parent} (--strimzi-secrets)") from None

    def secret_pattern(self, secret: str, pattern: str, line: int, where: str) -> list[str]:
        directory = self.source.secrets_dir / secret
        try:  # a mounted Secret also holds ..data and timestamped dirs: its keys are the plain names
            names = sorted(p.name for p in directory.iterdir() if not p.name.startswith("."))
        except OSError as err:
            raise self.fail(line, where, f"cannot list {directory} ({err.strerror or err}): mount the Secret "
                                         f"{secret} there (--strimzi-secrets)") from None
        matched = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
        if not matched:
            raise self.fail(line, where, f"no file in {directory} matches {pattern!r}")
        return [self.secret_file(secret, n, line, where) for n in matched]


def text(value: Any) -> str:
    """A YAML value as the operator hands it to Kafka: booleans as Java writes them."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)

"""The settings `mirrorlag run` starts with that are not at their defaults, and where each was set
(issue 31): what a reader of the log needs to know which file and line to change.

Only keys mirrorlag reads count (MirrorMaker's own keys, such as replication.factor, are MM2's
business), each as written with its file and line; secrets show as ***.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Callable, Collection, Mapping, Sequence

from mirrorlag.config.client import CLIENT_KEYS, Prop
from mirrorlag.config.known_keys import (
    CONSUMER_KEYS_READ,
    FLOW_KEYS_READ,
    OTHER_KEYS_READ,
    TOP_KEYS_READ,
    WORKER_KEYS_READ,
    KeyParts,
    split_key,
)
from mirrorlag.config.settings import InForce, Settings, is_secret_key

log = logging.getLogger(__name__)

_USERINFO = re.compile(r"(://)[^/@\s]+@")  # a URL's user:password@
_CONSUMER_PREFIXES = ("consumer.", "source.consumer.")
DefaultTest = Callable[[str], bool]  # whether a value, as written, means the key's default


def non_defaults(props: Mapping[str, Prop], files: Sequence[Path], aliases: Collection[str], flows: Collection[str],
                 global_keys: Mapping[str, DefaultTest], flow_keys: Mapping[str, DefaultTest]) -> tuple[InForce, ...]:
    """The keys in `props` mirrorlag reads whose values are not their defaults, in the order of
    `files` (the order they are layered in) and of their lines.

    `flows` are the enabled flows ("A->B"): a per-flow key of any other flow is not in force.
    `global_keys` and `flow_keys` map the loader's GLOBAL_KEYS and FLOW_KEYS to a test of whether
    a text means the key's default (30000 and +30000 both do)."""
    found = []
    for key, prop in props.items():
        parts = split_key(key, aliases)
        if not _read(parts, flows, global_keys, flow_keys):
            continue
        is_default = global_keys.get(parts.bare) or flow_keys.get(parts.bare) or _text_default(parts.bare)
        if not is_default(prop.value):
            found.append(InForce(key, shown(key, prop.value), prop.file, prop.line))
    return tuple(sorted(found, key=lambda f: (files.index(f.file), f.line)))


def shown(key: str, value: str) -> str:
    """A value fit for a log line: a secret's never, nor a URL's user and password."""
    return "***" if is_secret_key(key) else _USERINFO.sub(r"\1***@", value.strip())


def _read(parts: KeyParts, flows: Collection[str], global_keys: Collection[str], flow_keys: Collection[str]) -> bool:
    """Whether mirrorlag reads the key (for the flows in force): see loader.py and client.py."""
    if not parts.scope:
        return not parts.client and (parts.bare in global_keys or parts.bare in flow_keys or parts.bare in TOP_KEYS_READ)
    if "->" in parts.scope:  # A->B.: a global-only key there is ignored (the loader warns)
        if parts.scope[:-1] not in flows:
            return False
        if parts.client:
            return parts.client in _CONSUMER_PREFIXES and parts.bare in CONSUMER_KEYS_READ
        return parts.bare in flow_keys or parts.bare in FLOW_KEYS_READ
    if parts.client == "admin.":  # <alias>.admin.
        return parts.bare in CLIENT_KEYS
    if parts.client:
        return parts.client == "consumer." and parts.bare in CONSUMER_KEYS_READ
    return parts.bare in CLIENT_KEYS or parts.bare in WORKER_KEYS_READ


def _text_default(bare: str) -> Callable[[str], bool]:
    default = {**OTHER_KEYS_READ, **CONSUMER_KEYS_READ}.get(bare)
    return lambda value: default is not None and value.strip().lower() == default


def log_effective(settings: Settings) -> None:
    """INFO lines at `run`'s start: each setting not at its default, with its file and line."""
    if not settings.non_defaults:
        log.info("every mirrorlag setting is at its default (read %s)", ", ".join(map(str, settings.files)))
        return
    log.info("settings in force that are not at their defaults (%d):", len(settings.non_defaults))
    for entry in settings.non_defaults:
        log.info("  %s", entry)

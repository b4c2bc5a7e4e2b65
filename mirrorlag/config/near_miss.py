"""Did-you-mean warnings for misspelt MirrorMaker and KIP-971 keys (issue 31).

MirrorMaker ignores keys it does not know, so `replication.lag.time.max = 8000` would pass without
a word and the default would quietly stay in force. A key that is close in spelling to one
mirrorlag reads, and is not itself a documented MM2/Connect/client key (known_keys.VALID_KEYS),
gets one warning naming its file and line. A warning, never an error: MM2 runs with the file too.
(`mirrorlag.*` keys are the loader's: an unknown one is an error there.)
"""

from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass
from typing import Collection, Iterable, Mapping

from mirrorlag.config.client import Prop
from mirrorlag.config.known_keys import (
    CONSUMER_KEYS_READ,
    FREE_PREFIXES,
    OTHER_KEYS_READ,
    VALID_KEYS,
    split_key,
)

log = logging.getLogger(__name__)

# difflib's ratio, 2*matches/total length: 0.88 catches a dropped ".ms" or a doubled letter in
# the long dotted names and leaves different names that share words (e.g. the *.replication.factor
# family, all in VALID_KEYS anyway) alone.
CUTOFF = 0.88


@dataclass(frozen=True)
class NearMiss:
    key: str  # as written, e.g. "A->B.replication.lag.time.max"
    suggestion: str  # the key mirrorlag reads, with the same prefix, e.g. "A->B.replication.lag.time.max.ms"
    known: str  # the bare key it reads, e.g. "replication.lag.time.max.ms"


def near_misses(keys: Iterable[str], aliases: Collection[str], read: Collection[str]) -> list[NearMiss]:
    """The keys (in the order given) that are near misses of a key mirrorlag reads.

    `read` holds the bare keys the loader reads at the top level or per flow (its FLOW_KEYS and
    GLOBAL_KEYS); the cluster, worker and client keys it reads are added here."""
    top = sorted({*read, *OTHER_KEYS_READ} - {k for k in read if k.startswith("mirrorlag.")})
    client_keys = sorted(CONSUMER_KEYS_READ)
    found = []
    for key in keys:
        parts = split_key(key, aliases)
        rest = parts.client + parts.bare
        if rest.startswith(FREE_PREFIXES) or any(tail in VALID_KEYS or tail in top for tail in _tails(rest)):
            continue  # a known key, maybe behind a prefix we do not know (an alias not in `clusters`)
        candidates = client_keys if parts.client else top
        if parts.bare in VALID_KEYS or parts.bare in candidates:
            continue
        # Java's keys are case-sensitive: `Clusters` is a different, unknown key.
        close = difflib.get_close_matches(parts.bare.lower(), candidates, n=1, cutoff=CUTOFF)
        if close:
            found.append(NearMiss(key, parts.prefix + close[0], close[0]))
    return found


def _tails(key: str) -> list[str]:
    """`key` and what follows each of its dots, down to two words: a.b.c.d, b.c.d, c.d (one
    word, such as `enabled`, says too little to take the rest for a prefix)."""
    parts = key.split(".")
    return [key] + [".".join(parts[i:]) for i in range(1, len(parts) - 1)]


def warn_near_misses(props: Mapping[str, Prop], aliases: Collection[str], defaults: Mapping[str, str]) -> None:
    """One WARNING per near miss in `props`; `defaults` maps the loader's bare keys to their
    defaults (as MM2 would write them), to say what is in force instead."""
    known_defaults = {**OTHER_KEYS_READ, **CONSUMER_KEYS_READ, **defaults}
    for miss in near_misses(props, aliases, defaults):
        prop = props[miss.key]
        log.warning("%s:%d: unknown key '%s'; did you mean '%s'? (MirrorMaker ignores unknown keys; "
                    "mirrorlag reads '%s', %s)", prop.file, prop.line, miss.key, miss.suggestion,
                    miss.suggestion, _in_force(miss, props, known_defaults.get(miss.known)))


def _in_force(miss: NearMiss, props: Mapping[str, Prop], default: str | None) -> str:
    if (prop := props.get(miss.suggestion)) is not None:
        return f"set at {prop.file}:{prop.line}"
    if "->" in miss.key and (prop := props.get(miss.known)) is not None:  # a flow falls back to the top level
        return f"here from {miss.known} at {prop.file}:{prop.line}"
    if default is None:
        return "not set"
    return f"here its default {default}" if default else "here unset"

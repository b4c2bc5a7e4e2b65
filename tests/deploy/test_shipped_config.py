"""The configuration we ship is what it says it is (issue 31).

config/mirrorlag.properties lists every key of the loader's tables with its default and a comment
of its own, and every properties text shipped (config/, the Kubernetes ConfigMaps, the Strimzi
connectors' config) sets a key mirrorlag reads only to its default, or says why beside it. The
defaults are the loader's tables, read when the test runs: a default changed in loader.py makes
the shipped files fail here until they follow."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mirrorlag.config import load_settings
from mirrorlag.config.loader import GLOBAL_KEYS
from tests.deploy.common import CONFIG, DEPLOY, kubernetes_docs
from tests.deploy.shipped_config import MARK, Shown, listing_problems, not_default_unexplained, says_why, shown

SIDECAR = CONFIG / "mirrorlag.properties"
STRIMZI_KIND = ("kafka.strimzi.io/v1", "KafkaMirrorMaker2")


def shipped_texts() -> dict[str, str]:
    """Every properties text we ship, by where it is."""
    texts = {f"config/{p.name}": p.read_text() for p in sorted(CONFIG.glob("*.properties"))}
    for path, doc in kubernetes_docs():
        if doc["kind"] == "ConfigMap":
            for name, text in doc.get("data", {}).items():
                if name.endswith(".properties"):
                    texts[f"{path.relative_to(DEPLOY.parent)}:ConfigMap/{doc['metadata']['name']}/{name}"] = text
    return texts


def test_the_shipped_texts_are_found():
    names = set(shipped_texts())
    assert {"config/mirrorlag.properties", "config/mm2.properties"} <= names
    assert sum("ConfigMap" in name and name.endswith("/mirrorlag.properties") for name in names) == 2


def test_mirrorlag_properties_lists_every_key_once_with_a_comment():
    assert listing_problems("config/mirrorlag.properties", shown(SIDECAR.read_text())) == []


@pytest.mark.parametrize("name", sorted(shipped_texts()))
def test_shipped_properties_run_the_defaults_or_say_why(name):
    assert not_default_unexplained(name, shown(shipped_texts()[name])) == []


def _yaml_comment_above(path: Path, key: str) -> str:
    """The `#` lines directly above the (only) `key:` line of a YAML file: yaml drops comments."""
    lines = path.read_text().splitlines()
    (index,) = [i for i, line in enumerate(lines) if re.match(rf"\s*{re.escape(key)}:", line)]
    comment = []
    for line in reversed(lines[:index]):
        if not line.strip().startswith("#"):
            break
        comment.insert(0, line.strip().lstrip("#").strip())
    return " ".join(comment)


def test_strimzi_connector_config_runs_the_defaults_or_says_why():
    """The KafkaMirrorMaker2's `config` maps are MM2's keys in YAML: the same rule."""
    for path, doc in kubernetes_docs():
        if (doc["apiVersion"], doc["kind"]) != STRIMZI_KIND:
            continue
        spec = doc["spec"]
        configs = [spec["target"].get("config", {})]
        for mirror in spec["mirrors"]:
            configs += [mirror.get(c, {}).get("config", {}) for c in ("sourceConnector", "checkpointConnector",
                                                                       "heartbeatConnector")]
        lines = [Shown(key, str(value).lower() if isinstance(value, bool) else str(value), 0, True,
                       _yaml_comment_above(path, key)) for config in configs for key, value in config.items()]
        assert any(s.key == "offset-syncs.topic.location" for s in lines)  # one key of the tables is there
        assert not_default_unexplained(str(path.relative_to(DEPLOY.parent)), lines) == []


def test_the_header_names_every_difference_and_the_rest_loads_as_the_defaults(tmp_path):
    """What the header says is true: it names each marked difference, and without those lines the
    file changes nothing mm2.properties alone would load to (the real loader, every field)."""
    text = SIDECAR.read_text()
    header = text.split("\n\n", 1)[0]
    lines = shown(text)
    different = [s for s in lines if s.active and says_why(s.comment)]
    assert different, "the file says one key differs"
    for s in different:
        assert s.key in header, f"the header does not name {s.key}, which differs from its default"
    kept = [line for number, line in enumerate(text.splitlines(), 1) if number not in {s.line for s in different}]
    (tmp_path / "mirrorlag.properties").write_text("\n".join(kept) + "\n")
    mm2 = CONFIG / "mm2.properties"
    alone = load_settings([mm2])
    layered = load_settings([mm2, tmp_path / "mirrorlag.properties"])
    assert layered == alone.__class__(**{**vars(alone), "files": layered.files})


# --- the checks catch what they are for -----------------------------------------------------


def _edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def test_a_shown_value_off_the_default_is_caught_unless_marked():
    text = SIDECAR.read_text()
    wrong_comment = _edit(text, "#mirrorlag.metrics.detail = auto", "#mirrorlag.metrics.detail = full")
    assert len(not_default_unexplained("x", shown(wrong_comment))) == 1
    active = _edit(text, "#mirrorlag.metrics.detail = auto", "mirrorlag.metrics.detail = full")
    assert len(not_default_unexplained("x", shown(active))) == 1
    marked = _edit(text, "#mirrorlag.metrics.detail = auto",
                   f"# {MARK} a small estate, every series wanted\nmirrorlag.metrics.detail = full")
    assert not_default_unexplained("x", shown(marked)) == []
    unmarked_history = _edit(text, "# differs from the default: the image", "# the image")
    assert len(not_default_unexplained("x", shown(unmarked_history))) == 1
    # the same value written otherwise is still the default; a value the loader refuses is not
    spaced = _edit(text, "#mirrorlag.lro.feeds = offset-syncs,connect-offsets,target-progress",
                   "mirrorlag.lro.feeds = offset-syncs, connect-offsets, target-progress")
    assert not_default_unexplained("x", shown(spaced)) == []
    refused = _edit(text, "#mirrorlag.leo.chunk.size = 250", "mirrorlag.leo.chunk.size = many")
    assert len(not_default_unexplained("x", shown(refused))) == 1


def test_a_missing_unknown_repeated_or_bare_key_is_caught():
    text = SIDECAR.read_text()
    missing = _edit(text, "#mirrorlag.request.timeout.ms = 10000\n", "")
    assert listing_problems("x", shown(missing)) == ["x: mirrorlag.request.timeout.ms is missing"]
    unknown = text + "# a typo\n#mirrorlag.metrics.detial = auto\n"
    assert ["is not a key mirrorlag reads" in p for p in listing_problems("x", shown(unknown))] == [True]
    repeated = text + "# again\nmirrorlag.http.listener = 0.0.0.0:9464\n"
    assert ["shown again" in p for p in listing_problems("x", shown(repeated))] == [True]
    bare = _edit(text, "# ... of this many seconds each.\n", "\n")
    assert ["no comment of its own" in p for p in listing_problems("x", shown(bare))] == [True]


def test_the_defaults_are_the_loaders_tables_at_run_time(monkeypatch):
    """Another default in loader.py (here mirrorlag.metadata.max.age.ms, 60000 -> 120000) fails the shipped
    file until it shows the new default."""
    parser, _ = GLOBAL_KEYS["mirrorlag.metadata.max.age.ms"]
    monkeypatch.setitem(GLOBAL_KEYS, "mirrorlag.metadata.max.age.ms", (parser, "120000"))
    problems = not_default_unexplained("config/mirrorlag.properties", shown(SIDECAR.read_text()))
    assert len(problems) == 1 and "mirrorlag.metadata.max.age.ms" in problems[0]

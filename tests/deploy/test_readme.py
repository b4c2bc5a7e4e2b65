"""deploy/README.md, the operator's walkthrough, stays true: it names every file under deploy/,
every path it names exists, every mirrorlag key it names is a key mirrorlag reads (with the
default it states), and its alert table is the rule file's alerts."""

from __future__ import annotations

import re

from mirrorlag.config.loader import FLOW_KEYS, GLOBAL_KEYS
from tests.deploy.common import DEPLOY, REPO, RULES, yaml_docs

README = DEPLOY / "README.md"


def text() -> str:
    return README.read_text()


def test_every_deploy_file_is_described():
    described = text()
    for path in sorted(p for p in DEPLOY.rglob("*") if p.is_file() and p != README):
        relative = path.relative_to(DEPLOY).as_posix()
        assert relative in described or path.name in described, f"deploy/README.md never mentions {relative}"


def test_every_path_it_names_exists():
    for match in re.findall(r"`((?:\.\./)?(?:config|kubernetes|prometheus|grafana|systemd)/[\w./-]+)`", text()):
        base = REPO if match.startswith("config/") else DEPLOY
        assert (base / match).exists(), match


def test_every_mirrorlag_key_is_real_with_its_stated_default():
    keys = {**GLOBAL_KEYS, **FLOW_KEYS}
    rows = [(k, d) for k, d in re.findall(r"^\| `([\w.-]+)` \| `?([^|`]+?)`? \|", text(), flags=re.M)
            if not k.startswith("Mirrorlag")]
    assert len(rows) >= 8
    for key, default in rows:
        assert key in keys, key
        if " " not in default and default not in ("unset", "unlimited"):
            assert keys[key][1] == default, key


def test_alert_table_is_the_rule_files_alerts():
    alerts = {r["alert"] for g in yaml_docs(RULES)[0]["groups"] for r in g["rules"] if "alert" in r}
    table = set(re.findall(r"^\| `(Mirrorlag\w+)` \|", text(), flags=re.M))
    assert table == alerts


ROOT_README = REPO / "README.md"
CONFIGURATION = REPO / "docs" / "configuration.md"
# The front page and the reference pages it links (docs/): where the figures and key tables live.
REFERENCE = (ROOT_README, *sorted((REPO / "docs").glob("*.md")))
RESULTS = REPO / "tests" / "bench" / "RESULTS.md"
_REPEATED = {
    "poll time at 10k": r"a poll of 10,000 partitions takes (~[\d.]+ s)",
    "its parts": r"\(poll (\d+ ms \+ publish \d+ ms)",
    "series a partition": r"up to (\d+) series a partition",
}


def test_the_figures_it_repeats_are_the_reference_pages():
    """The figures deploy/README.md repeats say what the reference says (docs/performance.md,
    docs/metrics.md), and the series a partition are the exporter's: its per-partition families
    and the state."""
    from mirrorlag.exporters.prometheus import FAMILIES

    root = " ".join(" ".join(page.read_text().split()) for page in REFERENCE)  # a phrase may wrap
    for what, pattern in _REPEATED.items():
        here = set(re.findall(pattern, " ".join(text().split()), flags=re.I))
        there = set(re.findall(pattern, root, flags=re.I))
        assert len(here) == 1 and here == there, (what, here, there)
    assert set(re.findall(_REPEATED["series a partition"], root)) == {str(len(FAMILIES) + 1)}


def test_the_results_sections_it_names_exist():
    headings = [line.lstrip("#").strip() for line in RESULTS.read_text().splitlines() if line.startswith("#")]
    named = set(re.findall(r'"((?:Issue \d+|\w+ pass)[^"]*)"', " ".join(text().split())))
    assert len(named) >= 3
    for name in named:
        assert any(h.startswith(name) for h in headings), name


def default_tables(readme: str) -> list[tuple[str, str]]:
    """(key cell, default cell) of the rows of every `| key | default | ... |` table."""
    rows, inside = [], False
    for line in readme.splitlines():
        if line.startswith("| key | default |"):
            inside = True
        elif not line.startswith("|"):
            inside = False
        elif inside and not line.startswith("|---"):
            key, default = (cell.strip() for cell in line.split("|")[1:3])
            rows.append((key, default))
    return rows


def test_the_key_tables_state_the_loaders_defaults():
    """The key tables of both READMEs and of the docs/ pages name the loader's defaults (read from
    its tables now); a row of several keys (`a` / `b`) states one default each."""
    keys = {**GLOBAL_KEYS, **FLOW_KEYS}
    words = {"unset": "", "unlimited": str(2**63 - 1), "7 days": "604800000", "14 days": "1209600000", "1 h": "3600000"}
    checked = 0
    for readme in (*REFERENCE, README):
        for key_cell, default_cell in default_tables(readme.read_text()):
            names = re.findall(r"`([\w.<>-]+)`", key_cell)
            defaults = [d.strip().strip("`") for d in default_cell.split(" / ")]
            if len(names) != len(defaults):
                defaults = [default_cell.strip("`")]  # `a` / `.b`: one key's default given
            for name, default in zip(names, defaults):
                name = next((k for k in keys if k.endswith(name)), name) if name.startswith(".") else name
                if name not in keys:
                    assert name.startswith("<"), f"{readme.name}: {name} is not a key mirrorlag reads"
                    continue
                default = words.get(default.split(" (")[0], default)
                parser, expected = keys[name]
                assert parser(default) == parser(expected), f"{readme.name}: {name} default {default!r}"
                checked += 1
    assert checked >= 30


def test_the_configuration_page_names_every_key():
    """docs/configuration.md is the list of every key mirrorlag reads."""
    text = CONFIGURATION.read_text()
    missing = [key for key in {**GLOBAL_KEYS, **FLOW_KEYS} if f"`{key}`" not in text]
    assert not missing, f"docs/configuration.md does not name {missing}"


def test_replication_lag_time_max_is_called_mirrorlags_own_key():
    """Issue 42: the README called `replication.lag.time.max.ms` MM2's default. MM2 reads no such
    key: it is mirrorlag's own, named after the broker's `replica.lag.time.max.ms`. Each place a
    user meets it first says so; no page, shipped file or help text calls it MM2's."""
    from mirrorlag.cli import CHECK_EPILOG

    shipped = (REPO / "config" / "mirrorlag.properties", REPO / "config" / "mm2.properties")
    said = {path.name: " ".join(re.sub(r"^#", "", path.read_text(), flags=re.M).split())  # a comment may wrap
            for path in (*REFERENCE, *shipped)}
    said["check --help"] = " ".join(CHECK_EPILOG.split())
    for where, words in said.items():
        assert not re.search(r"MM2's (?:default|key)[^.;]{0,40}\b30 ?s\b", words), where
    for where in ("README.md", "configuration.md", "mirrorlag.properties", "check --help"):
        assert re.search(r"mirrorlag's own key[^.]{0,60}\bthe broker's `?replica\.lag\.time\.max\.ms", said[where]), where

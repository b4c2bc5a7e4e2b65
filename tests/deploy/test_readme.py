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

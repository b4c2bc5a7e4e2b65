"""The sidecar's memory in every deployment survives the outage it should report (issue 31): each
manifest and the systemd unit say how many partitions they are sized for and the commands their
figures come from, and their request and limit cover what tests/deploy/sizing.py computes for that
many partitions from the measured figures and the history defaults (read from the loader's tables
at run time). The demo's sidecar fits in the request."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.deploy import sizing
from tests.deploy.common import DEPLOY, kubernetes_docs

MEMORY_BENCH = "bench_memory --partitions 10000 --runs 1 --feed target-progress --stall-after 1"
HISTORY_BENCH = "bench_history_rows --partitions 10000 --snapshots 50"
UNIT = DEPLOY / "systemd" / "mirrorlag.service"
README = DEPLOY / "README.md"


def sized_for(text: str) -> int:
    (count,) = set(re.findall(r"sized for ([\d,]+) partitions", text))
    return int(count.replace(",", ""))


def mib(quantity: str) -> float:
    """A Kubernetes quantity or a systemd size (K, M, G are powers of 1024 there) in MiB."""
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "K": 1 / 1024, "M": 1, "G": 1024}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return float(quantity[: -len(suffix)]) * factor
    return float(quantity) / 2**20


def sidecars() -> list[tuple[Path, dict]]:
    return [(path, c) for path, doc in kubernetes_docs() if doc["kind"] == "Deployment"
            for c in doc["spec"]["template"]["spec"]["containers"] if c["image"].startswith("mirrorlag:")]


@pytest.mark.parametrize("path,container", sidecars(), ids=lambda v: v.name if isinstance(v, Path) else "")
def test_manifest_memory_covers_an_outage_at_its_partition_count(path, container):
    text = path.read_text()
    partitions = sized_for(text)
    assert MEMORY_BENCH in text and HISTORY_BENCH in text, "say which commands the figures come from"
    request = mib(container["resources"]["requests"]["memory"])
    limit = mib(container["resources"]["limits"]["memory"])
    assert request >= sizing.request_mib(partitions), (request, sizing.request_mib(partitions))
    assert limit >= sizing.limit_mib(partitions), (limit, sizing.limit_mib(partitions))
    assert sizing.DEMO_MIB < request <= limit


def test_systemd_memory_max_covers_an_outage_at_its_partition_count():
    text = UNIT.read_text()
    (memory_max,) = re.findall(r"^MemoryMax=(\S+)$", text, flags=re.M)
    assert MEMORY_BENCH in text and HISTORY_BENCH in text
    assert mib(memory_max) >= sizing.limit_mib(sized_for(text))


def test_readme_states_what_the_deployments_are_sized_for():
    text = README.read_text()
    partitions = {sized_for(path.read_text()) for path, _ in sidecars()} | {sized_for(UNIT.read_text())}
    assert partitions == {sized_for(text)}
    for _, container in sidecars():
        for quantity in (container["resources"]["requests"]["memory"], container["resources"]["limits"]["memory"]):
            assert f"`{quantity}`" in text, quantity
    assert MEMORY_BENCH in text and HISTORY_BENCH in text


def test_readmes_worked_example_for_100k_covers_it():
    flat = " ".join(README.read_text().split())
    (request, limit) = re.findall(r"100,000 partitions: request .*?`requests.memory: (\w+)`, `limits.memory: (\w+)`", flat)[0]
    assert mib(request) >= sizing.request_mib(100_000) and mib(limit) >= sizing.limit_mib(100_000)


def test_the_sizing_follows_the_history_defaults(monkeypatch):
    """A larger history buffer by default (loader.py) needs a larger limit: the test would fail the
    manifests until they follow."""
    from mirrorlag.config.loader import GLOBAL_KEYS

    before = sizing.limit_mib(10_000)
    parser, _ = GLOBAL_KEYS["mirrorlag.history.buffer.max.rows"]
    monkeypatch.setitem(GLOBAL_KEYS, "mirrorlag.history.buffer.max.rows", (parser, "4000000"))
    assert sizing.limit_mib(10_000) > before + 250

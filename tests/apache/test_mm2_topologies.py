"""Topologies on the real MirrorMaker 2, judged against the truth read from the data.

Two source clusters A and B mirror one topic into cluster C under IdentityReplicationPolicy, so
both flows write C's topic of the same name; B->C writes no offset syncs
(`B->C.emit.offset-syncs.enabled = false`) and A->C writes its syncs on the target
(`offset-syncs.topic.location = target`), where the sidecar reads them. Each flow runs in an MM2
of its own (`--clusters C`), so A's can be frozen while B's goes on copying; the sidecar reads one
mm2.properties with both flows. The claims, through `/status`, `/metrics` and `mirrorlag check
--json` on each pinned Kafka version:
- target progress is off for the shared topic (another writer's records are no copies of A's),
  named with its reason, and the offset syncs of A->C are read on C;
- caught up, both flows read IN_SYNC at record lag 0;
- A frozen while B copies: A->C never reads IN_SYNC past max and never hides a record owed, its
  LRO never above LRO_true, STALLED within its bound, and B's records count as no duplicates of A's;
- A thawed: IN_SYNC at 0 again.

Both ways between P and Q, P->Q's offset syncs on its source P and Q->P's on its target P: MM2
writes both into P's `mm2-offset-syncs.Q.internal`. Each flow keeps its own syncs (by the source
topic its filters accept; a topic both copy is no flow's evidence, named off), every poll's LRO is
at or below LRO_true, and every partition reads IN_SYNC at 0 once copied, also while copying goes on.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from mirrorlag.apache_kafka.processes import KRaftBroker
from mirrorlag.embedded import free_port
from tests.apache.conftest import ApachePair
from tests.apache.flow_watch import FlowWatch, check_rows, start_mm2, write_config
from tests.apache.sidecar_watch import MAX_S, POLL_S, sidecar_properties
from tests.apache.truth import NumberedProducer, append_time_s, lag_true, lro_true, watermarks
from tests.conftest import Clusters
from tests.helpers import eventually, running_sidecar, scrape

pytestmark = pytest.mark.integration

IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


@pytest.fixture(scope="module")
def second_source(apache_pair: ApachePair, tmp_path_factory) -> Iterator[KRaftBroker]:
    """A third cluster of the pair's version: the second source B."""
    broker = KRaftBroker(apache_pair.jars, tmp_path_factory.mktemp(f"b-{apache_pair.jars.version}"), "b")
    try:
        yield broker.start()
    finally:
        broker.stop()


def test_two_identity_flows_into_one_topic(apache_pair, second_source, tmp_path: Path):
    pair, tag = apache_pair, uuid.uuid4().hex[:8]
    a, b, c = f"a{tag}", f"b{tag}", f"c{tag}"
    a_flow, b_flow = f"{a}->{c}", f"{b}->{c}"
    boot = {a: pair.source.bootstrap_servers, b: second_source.bootstrap_servers, c: pair.target.bootstrap_servers}
    topic = f"orders-{tag}"
    Clusters(boot[a], boot[c]).create_topic(topic, 1)
    Clusters(boot[b], boot[c]).create_topic(topic, 1)
    from_a = NumberedProducer(boot[a], topic)
    from_b = NumberedProducer(boot[b], topic, counter=itertools.count(1_000_000))  # values unlike A's
    from_a.produce({0: 20})
    from_b.produce({0: 20})
    extra = {"replication.policy.class": IDENTITY, f"{a_flow}.topics": topic, f"{b_flow}.topics": topic,
             f"{b_flow}.emit.offset-syncs.enabled": "false", f"{a_flow}.offset-syncs.topic.location": "target",
             f"{a_flow}.offset-syncs.topic.replication.factor": 1, "emit.checkpoints.enabled": "false"}
    # MM2 refuses a flow with emit.offset-syncs.enabled = false whose connector config holds any
    # offset-syncs.topic.* key ("can't setup offset-syncs feature"): B->C copies nothing while a
    # top-level offset-syncs.topic.replication.factor reaches it. A->C's is set for A->C alone.
    without = ("offset-syncs.topic.replication.factor",)
    # The sidecar's file has both flows; each MM2's only its own (and only its clusters: a herder
    # of the other flow in both processes would make them one Connect group).
    config = write_config(tmp_path / "mm2.properties", boot, [a_flow, b_flow], extra, without)

    def truth(alias: str) -> int:
        return lro_true(boot[alias], topic, boot[c], topic, 0)

    def end(alias: str) -> int:
        return Clusters(boot[alias], boot[c]).end_offset(topic)

    def copied(*aliases: str) -> None:
        for alias in aliases:
            assert truth(alias) == end(alias) - 1, (alias, truth(alias), end(alias))

    mm2_a = start_mm2(pair.jars, tmp_path / "mm2-a", {a: boot[a], c: boot[c]}, [a_flow], extra, (c,), "mm2-a", without)
    mm2_b = None
    try:
        mm2_b = start_mm2(pair.jars, tmp_path / "mm2-b", {b: boot[b], c: boot[c]}, [b_flow], extra, (c,), "mm2-b", without)
        eventually(lambda: copied(a, b), timeout=120, interval=0.5)

        port = free_port()
        side = sidecar_properties(tmp_path / "sidecar.properties", port)
        watch = FlowWatch(port, topic)
        with running_sidecar(config, side, port=port, log=tmp_path / "sidecar.log"):
            both = (a_flow, b_flow)
            caught = watch.until(lambda p: all(p.rows.get((f, 0), {}).get("state") == "IN_SYNC"
                                               and p.rows[(f, 0)]["record_lag"] == 0 for f in both),
                                 30, "both flows IN_SYNC at 0")
            assert caught.rows[(a_flow, 0)]["lro"] == truth(a) and caught.rows[(b_flow, 0)]["lro"] == truth(b), \
                watch.describe(caught)
            feeds = caught.feeds
            progress_off = [o for f in feeds if f["feed"] == "target-progress" for o in f.get("off", [])
                            if topic in o.get("topics", [])]
            assert progress_off and set(progress_off[0]["flows"]) == {a_flow, b_flow}, feeds
            syncs = [f for f in feeds if f["feed"] == "offset-syncs" and f["cluster"] == c]
            assert syncs and f"mm2-offset-syncs.{a}.internal" in syncs[0]["topics"], feeds

            # A frozen while B goes on copying into the same topic.
            mm2_a.pause()
            frozen = truth(a)
            paused_at = time.time()
            from_a.produce({0: 15})
            from_b.produce({0: 30})
            leo_a = end(a)
            eventually(lambda: copied(b), timeout=60, interval=0.5)
            assert truth(a) == frozen  # A's MM2 is frozen: none of A's new records is on C

            def honest(poll) -> bool:
                row = poll.rows[(a_flow, 0)]
                assert row["lro"] is None or row["lro"] <= frozen, watch.describe(poll)
                if row["leo"] == leo_a:
                    assert row["record_lag"] >= lag_true(leo_a, frozen) == 15, watch.describe(poll)
                return row["leo"] == leo_a and row["state"] == "STALLED"

            stalled = watch.until(honest, MAX_S + 6 * POLL_S + 15, "A->C STALLED")
            assert stalled.taken_at <= paused_at + MAX_S + 6 * POLL_S + 10, watch.describe(stalled)
            for poll in watch.polls:
                if poll.taken_at > paused_at + MAX_S + 4 * POLL_S:
                    assert poll.rows[(a_flow, 0)]["state"] != "IN_SYNC", watch.describe(poll)
            b_caught = watch.until(lambda p: honest(p) and p.rows[(b_flow, 0)]["state"] == "IN_SYNC"
                                   and p.rows[(b_flow, 0)]["record_lag"] == 0, 30, "B->C IN_SYNC beside A->C STALLED")
            assert b_caught.rows[(b_flow, 0)]["lro"] == truth(b), watch.describe(b_caught)
            code, rows, out = check_rows(config, side, topic=topic)
            assert code == 2, out  # CRITICAL: A->C STALLED
            # Stalled past a flush, A's syncs (on C) and commits name its last copy: the lag is exact.
            assert rows[(a_flow, 0)]["state"] == "STALLED" and rows[(a_flow, 0)]["record_lag"] == 15, out
            assert rows[(b_flow, 0)]["state"] == "IN_SYNC" and rows[(b_flow, 0)]["record_lag"] == 0, out
            duplicates = {k: v for k, v in scrape(port).items()
                          if k[0] == "mirrorlag_mirror_duplicate_records_total" and ("topic", topic) in k[1]}
            assert all(v == 0 for v in duplicates.values()), duplicates  # B's records are no duplicates of A's

            mm2_a.resume()
            final = watch.until(lambda p: all(p.rows[(f, 0)]["state"] == "IN_SYNC" and p.rows[(f, 0)]["record_lag"] == 0
                                              for f in both) and p.rows[(a_flow, 0)]["leo"] == leo_a,
                                60, "IN_SYNC at 0 after the thaw")
            assert final.rows[(a_flow, 0)]["lro"] == truth(a) == leo_a - 1, watch.describe(final)
    finally:
        mm2_a.stop()
        if mm2_b is not None:
            mm2_b.stop()


def test_both_ways_with_sync_topics_of_one_name(apache_pair, tmp_path: Path):
    """P->Q writes its offset syncs on its source P (`mm2-offset-syncs.Q.internal`) and Q->P on its
    target (`offset-syncs.topic.location = target`): the same topic on P. Each flow's LROs come
    from its own syncs only (never above LRO_true), a topic both flows copy is named off in
    `/status`, and every partition reads IN_SYNC at 0 once copied."""
    pair, tag = apache_pair, uuid.uuid4().hex[:8]
    p, q = f"p{tag}", f"q{tag}"
    pq, qp = f"{p}->{q}", f"{q}->{p}"
    boot = {p: pair.source.bootstrap_servers, q: pair.target.bootstrap_servers}
    orders, payments = f"orders-{tag}", f"payments-{tag}"
    both = Clusters(boot[p], boot[q])
    both.create_topic(orders, 1, "source")
    both.create_topic(orders, 1, "target")
    both.create_topic(payments, 1, "target")
    # P's orders far ahead of Q's: P->Q's syncs read as Q->P's would put its LRO past its LEO.
    from_p = NumberedProducer(boot[p], orders)
    from_p.produce({0: 60})
    NumberedProducer(boot[q], orders).produce({0: 10})
    NumberedProducer(boot[q], payments).produce({0: 25})
    extra = {f"{pq}.topics": orders, f"{qp}.topics": f"{orders}, {payments}",
             f"{qp}.offset-syncs.topic.location": "target", "emit.checkpoints.enabled": "false"}
    copies = {(pq, orders): (p, q, f"{p}.{orders}"), (qp, orders): (q, p, f"{q}.{orders}"),
              (qp, payments): (q, p, f"{q}.{payments}")}

    def truth(flow: str, topic: str) -> int:
        src, dst, remote = copies[(flow, topic)]
        return lro_true(boot[src], topic, boot[dst], remote, 0)

    def copied() -> None:
        for (flow, topic), (src, _, _) in copies.items():
            leo = Clusters(boot[src], boot[src]).end_offset(topic)
            assert truth(flow, topic) == leo - 1, (flow, topic, truth(flow, topic), leo)

    mm2 = start_mm2(pair.jars, tmp_path / "mm2", boot, [pq, qp], extra, (p, q))
    try:
        eventually(copied, timeout=120, interval=0.5)
        port = free_port()
        side = sidecar_properties(tmp_path / "sidecar.properties", port)
        watch = {t: FlowWatch(port, t) for t in (orders, payments)}
        with running_sidecar(mm2.properties, side, port=port, log=tmp_path / "sidecar.log"):
            wrong: list[tuple] = []  # every poll is held to the truth, not only the last one

            def all_in_sync() -> None:
                rows = {(f, t): r for t, w in watch.items() for (f, _), r in w.next().rows.items()}
                for (flow, topic), row in rows.items():
                    if (row["lro"] is not None and row["lro"] > truth(flow, topic)) or row["state"] not in ("IN_SYNC", "UNKNOWN"):
                        wrong.append((flow, topic, row["state"], row["lro"], truth(flow, topic)))  # nothing else happened
                assert set(rows) == set(copies) and all(r["state"] == "IN_SYNC" and r["record_lag"] == 0
                                                        for r in rows.values()), \
                    {k: (r["state"], r["leo"], r["lro"], r["lro_feed"], r["record_lag"]) for k, r in rows.items()}

            eventually(all_in_sync, timeout=40, interval=0.2)
            # Copying while the sidecar reads: P->Q's new syncs land in the shared topic.
            from_p.produce({0: 20})
            eventually(copied, timeout=60, interval=0.5)
            eventually(all_in_sync, timeout=40, interval=0.2)
            assert not wrong, wrong
            assert not wrong, wrong
            feeds = watch[orders].polls[-1].feeds
            syncs = [f for f in feeds if f["feed"] == "offset-syncs" and f["cluster"] == p]
            assert syncs and f"mm2-offset-syncs.{q}.internal" in syncs[0]["topics"], feeds
            off = [o for o in syncs[0]["off"] if orders in o["topics"]]
            assert off and set(off[0]["flows"]) == {pq, qp}, syncs
            code, rows, out = check_rows(mm2.properties, side, topic=payments)
            if code != 0:  # what each source held for the rows not IN_SYNC, read just after the check
                out += "\n".join(f"{r['flow']} {r['topic']}[{r['partition']}] {r['state']}: source "
                                  f"{watermarks(boot[r['source']], r['topic'], r['partition'])}"
                                  for r in json.JSONDecoder().raw_decode(out)[0] if r["state"] != "IN_SYNC")
            ended = time.time()
            assert code == 0 and rows[(qp, 0)]["state"] == "IN_SYNC" and rows[(qp, 0)]["record_lag"] == 0, out
            # No LRO is dated before its record was written (a commit saying 93 cannot predate
            # record 93; the check's clock read ends before `ended`): dated earlier, an LRO read
            # just after an end offset of 93 looked older than it, a false RESET.
            for r in json.JSONDecoder().raw_decode(out)[0]:
                if r["lro"] is not None and r["lro_feed"] in ("connect-offsets", "offset-syncs", "target-progress"):
                    written = append_time_s(boot[r["source"]], r["topic"], r["partition"], r["lro"])
                    assert written is None or r["lro_age_s"] <= ended - written + 0.01, (r, written, ended)
    finally:
        mm2.stop()

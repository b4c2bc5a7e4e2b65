"""Reachability from librdkafka's error reports and the polls' outcomes (the texts are librdkafka's)."""

from __future__ import annotations

from mirrorlag.kafka.reachability import Reachability, cause_of

REFUSED = "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused (after 0ms in state CONNECT)"
UNRESOLVED = ("nosuch.invalid:9092/bootstrap: Failed to resolve 'nosuch.invalid:9092': Name or service not known "
              "(after 1ms in state CONNECT, 2 identical error(s) suppressed)")
ALL_DOWN = "1/1 brokers are down"
IDLE_CLOSE = "b1:9092/1: Disconnected (after 600003ms in state UP)"
REQUEST_FAILED = "_TRANSPORT: Failed to get metadata: Local: Broker transport failure"


def tracker() -> Reachability:
    return Reachability({"src": "127.0.0.1:1", "dst": "b1:9092,b2:9092"})


def test_the_cause_reads_the_same_at_every_retry():
    assert cause_of(REFUSED) == "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused"
    assert cause_of(UNRESOLVED).endswith("Name or service not known")
    assert cause_of("_TRANSPORT: " + REFUSED) == cause_of(REFUSED)  # a feed's record names the code first
    assert cause_of(REFUSED[:-12]) == cause_of(REFUSED)  # a record cut short
    failed = f"metadata from cluster src: timed out (last client error: {REFUSED})"
    assert cause_of(failed) == f"metadata from cluster src: timed out (last client error: {cause_of(REFUSED)})"


def test_a_cluster_never_read_is_down_at_the_first_refusal_and_said_once():
    reach = tracker()
    assert reach.clusters["src"].reachable is None
    change = reach.client_error("src", REFUSED, now=100.0)
    assert change is not None and not change.was_down
    state = reach.clusters["src"]
    assert (state.reachable, state.since) == (False, 100.0)
    assert state.describe() == ("cluster src (bootstrap.servers 127.0.0.1:1): "
                                "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused")
    assert reach.client_error("src", REFUSED.replace("after 0ms", "after 3ms"), now=101.0) is None
    assert reach.client_error("src", ALL_DOWN, now=101.0) is None
    # The poll's timeout says less than the refusal: no second line, the refusal stays the cause.
    assert reach.poll_result("src", REQUEST_FAILED, now=110.0, poll_started=100.0) is None
    assert "Connection refused" in (state.error or "") and state.since == 100.0
    assert reach.first_down(("src",)) is state
    assert reach.to_dict()["src"] == {"bootstrap_servers": "127.0.0.1:1", "reachable": False,
                                      "error": state.error, "since": 100.0}


def test_the_same_failure_from_another_broker_or_cut_short_is_no_change():
    reach = tracker()
    sasl = ("sasl_plaintext://b1:9092/bootstrap: SASL PLAIN mechanism handshake failed: Broker: Unsupported SASL "
            "mechanism (after 0ms in state AUTH_HANDSHAKE)")
    assert reach.client_error("dst", sasl, now=1.0) is not None
    for text in (sasl[:-20], sasl.replace("b1:9092/bootstrap", "b2:9092/2"), "_AUTHENTICATION: " + sasl[:90]):
        assert reach.client_error("dst", text, now=2.0) is None, text
    assert reach.client_error("dst", REFUSED, now=3.0) is not None  # refused now: a change


def test_a_new_cause_while_down_is_a_change():
    reach = tracker()
    reach.client_error("src", REFUSED, now=1.0)
    change = reach.client_error("src", UNRESOLVED, now=2.0)
    assert change is not None and change.was_down and reach.clusters["src"].since == 1.0


def test_only_a_poll_begun_after_the_outage_proves_it_back():
    reach = tracker()
    reach.client_error("src", REFUSED, now=10.0)
    assert reach.poll_result("src", None, now=12.0, poll_started=9.0) is None  # its answers may predate it
    assert reach.clusters["src"].reachable is False
    change = reach.poll_result("src", None, now=15.0, poll_started=13.0)
    assert change is not None and change.down_for_s == 5.0
    assert (reach.clusters["src"].reachable, reach.clusters["src"].error) == (True, None)
    assert reach.poll_result("src", None, now=16.0, poll_started=15.5) is None  # said once


def test_a_cluster_read_last_is_not_down_for_one_broker_or_an_idle_close():
    reach = tracker()
    assert reach.poll_result("dst", None, now=1.0, poll_started=0.5) is None  # first read: nothing to say
    assert reach.client_error("dst", "b2:9092/2: Connect to ipv4#10.0.0.2:9092 failed: Connection refused "
                                     "(after 0ms in state CONNECT)", now=2.0) is None
    assert reach.client_error("dst", IDLE_CLOSE, now=3.0) is None
    assert reach.client_error("dst", REQUEST_FAILED, now=3.0) is None  # a request's failure, no broker's word
    assert reach.clusters["dst"].reachable is True
    # All its brokers down, with a broker's failure to say why: down at once.
    change = reach.client_error("dst", ALL_DOWN, now=4.0)
    assert change is not None and reach.clusters["dst"].reachable is False
    assert reach.clusters["dst"].error is not None and "Connection refused" in reach.clusters["dst"].error


def test_a_failed_poll_is_down_when_the_callback_said_nothing():
    reach = tracker()  # a blackholed address: no refusal, the request times out
    change = reach.poll_result("src", "metadata from cluster src: timed out", now=10.0, poll_started=0.0)
    assert change is not None and reach.clusters["src"].error == "metadata from cluster src: timed out"


def test_unknown_aliases_are_ignored():
    assert tracker().client_error("other", REFUSED, now=1.0) is None
    assert tracker().poll_result("other", "x", now=1.0, poll_started=0.0) is None


def test_a_targets_feeds_fail_it_by_a_failed_request_not_by_one_brokers_report():
    reach = tracker()
    assert reach.feeds_result("dst", [None, None], now=1.0, poll_started=0.5) is None
    assert reach.clusters["dst"].reachable is True
    one_broker = "_TRANSPORT: b2:9092/2: Connect to ipv4#10.0.0.2:9092 failed: Connection refused"
    assert reach.feeds_result("dst", [None, one_broker], now=2.0, poll_started=1.5) is None
    assert reach.clusters["dst"].reachable is True
    change = reach.feeds_result("dst", [one_broker, REQUEST_FAILED], now=3.0, poll_started=2.5)
    assert change is not None and reach.clusters["dst"].error == "Failed to get metadata: Local: Broker transport failure"
    change = reach.feeds_result("dst", [None, None], now=5.0, poll_started=4.0)
    assert change is not None and change.down_for_s == 2.0


def test_an_http_reply_is_said_plainly_wherever_it_is_quoted():
    """1213486160 is "HTTP" read as a Kafka response's size: the address is a web server's."""
    http = ("127.0.0.1:8080/bootstrap: Receive failed: Invalid response size 1213486160 (0..100000000): "
            "increase receive.message.max.bytes (after 2ms in state APIVERSION_QUERY)")
    plain = "127.0.0.1:8080 answers HTTP, not the Kafka protocol: is bootstrap.servers pointing at a web/REST port?"
    assert cause_of(http) == cause_of("_TRANSPORT: " + http) == plain
    failed = f"metadata from cluster src: timed out (last client error: {http})"
    assert cause_of(failed) == f"metadata from cluster src: timed out (last client error: {plain})"
    other = "b1:9092/1: Receive failed: Invalid response size 1213486161 (0..100000000): increase receive.message.max.bytes"
    assert cause_of(other) == other  # another size is another story

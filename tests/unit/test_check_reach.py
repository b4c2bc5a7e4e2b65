"""What `check`'s UNKNOWN says of a cluster: librdkafka's most specific reason, in plain words."""

from __future__ import annotations

from mirrorlag.check.reach import Reach, plain


def test_plain_drops_the_broker_name_and_the_connection_state():
    assert plain("127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused "
                 "(after 0ms in state CONNECT)") == "Connect to ipv4#127.0.0.1:1 failed: Connection refused"
    assert plain("1/1 brokers are down") == "1/1 brokers are down"


def test_a_specific_reason_wins_over_every_broker_down_whichever_comes_first():
    first = Reach("a", ("source",), "h:1")
    first.record("Failed to resolve 'h:1'", all_down=False)
    first.record("1/1 brokers are down", all_down=True)
    later = Reach("a", ("source",), "h:1")
    later.record("1/1 brokers are down", all_down=True)
    later.record("Failed to resolve 'h:1'", all_down=False)
    later.record("Connection refused", all_down=False)  # the first specific reason stays
    for reach in (first, later):
        assert (reach.error, reach.down) == ("Failed to resolve 'h:1'", True)


def test_no_reason_is_how_long_it_was_waited_for():
    reach = Reach("b", ("source", "target"), "h:1,h:2")
    assert reach.name == "source and target cluster b (h:1,h:2)"
    assert (reach.reason(2.5), reach.reason(None), reach.down) == ("no answer within 2.5 s", None, False)

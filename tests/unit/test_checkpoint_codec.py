"""Golden bytes built by hand from mirror-client's Checkpoint.java: key = STRING group, STRING
topic, INT32 partition; value = INT16 version 0, INT64 upstreamOffset, INT64 offset, STRING
metadata (Kafka Structs, big-endian, no other prefix)."""

import pytest
from hypothesis import given, strategies as st

from mirrorlag.formats import BadRecord, Checkpoint, decode_checkpoint, encode_checkpoint

# group "billing", topic "A.orders", partition 2, upstream 1234, downstream 567, metadata ""
GOLDEN_KEY = b"\x00\x07billing" + b"\x00\x08A.orders" + b"\x00\x00\x00\x02"
GOLDEN_VALUE = b"\x00\x00" + bytes([0, 0, 0, 0, 0, 0, 0x04, 0xD2]) + bytes([0, 0, 0, 0, 0, 0, 0x02, 0x37]) + b"\x00\x00"
GOLDEN = Checkpoint("billing", "A.orders", 2, 1234, 567, "")


def test_decodes_hand_built_bytes():
    assert decode_checkpoint(GOLDEN_KEY, GOLDEN_VALUE) == GOLDEN


def test_encodes_the_bytes_mm2_writes():
    assert encode_checkpoint(GOLDEN) == (GOLDEN_KEY, GOLDEN_VALUE)


@pytest.mark.parametrize("key, value, why", [
    (None, GOLDEN_VALUE, "null"),
    (GOLDEN_KEY, None, "null"),
    (GOLDEN_KEY[:-1], GOLDEN_VALUE, "partition"),
    (GOLDEN_KEY, b"\x00\x01" + GOLDEN_VALUE[2:], "version 1"),
    (GOLDEN_KEY, GOLDEN_VALUE[:-1], "bytes"),
    (GOLDEN_KEY, GOLDEN_VALUE[:-2] + b"\x00\x05ab", "does not fit"),
    (GOLDEN_KEY, b"\x00\x00" + b"\xff" * 16 + b"\x00\x00", "negative"),
])
def test_malformed_records_are_bad_records_naming_why(key, value, why):
    with pytest.raises(BadRecord, match=why):
        decode_checkpoint(key, value)


@given(st.text(max_size=40), st.text(max_size=40), st.integers(0, 2**31 - 1),
       st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1), st.text(max_size=40))
def test_round_trip(group, topic, partition, upstream, downstream, metadata):
    c = Checkpoint(group, topic, partition, upstream, downstream, metadata)
    assert decode_checkpoint(*encode_checkpoint(c)) == c

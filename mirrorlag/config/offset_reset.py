"""`auto.offset.reset` as Kafka's Java consumer validates it (AutoOffsetResetStrategy.fromString):
`earliest`, `latest`, `none`, or, from Kafka 4.0 (KIP-1106), `by_duration:<ISO-8601 duration>`
parsed by java.time.Duration.parse and not negative. Case-sensitive but for the duration's letters,
as the Java validator is; a value the consumer would refuse stops MM2, so it is an error here too."""

from __future__ import annotations

import re

RESETS = ("earliest", "latest", "none")
BY_DURATION = "by_duration:"
# java.time.Duration.parse's grammar: PnDTnHnMn.nS, each part optional but one, signs allowed.
_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?(?:(T)(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?"
                       r"(?:([-+]?)(\d+)(?:[.,](\d{0,9}))?S)?)?", re.IGNORECASE)


def duration_s(text: str) -> float | None:
    """The seconds of a java.time.Duration string, None where Duration.parse would refuse it."""
    m = _DURATION.fullmatch(text)
    if m is None:
        return None
    sign, days, t, hours, minutes, s_sign, secs, frac = m.groups()
    if days is None and hours is None and minutes is None and secs is None:
        return None  # "P", "PT": no part
    if t is not None and hours is None and minutes is None and secs is None:
        return None  # "P1DT": a T with nothing after it
    seconds = int(secs or 0) + (int(frac.ljust(9, "0")) / 1e9 if frac else 0.0)
    total = int(days or 0) * 86_400 + int(hours or 0) * 3_600 + int(minutes or 0) * 60 \
        + (-seconds if s_sign == "-" else seconds)
    return -total if sign == "-" else total


def valid_reset(value: str) -> bool:
    if value in RESETS:
        return True
    if not value.startswith(BY_DURATION):
        return False
    seconds = duration_s(value[len(BY_DURATION):])
    return seconds is not None and seconds >= 0

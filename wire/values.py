"""kio's value types from plain numbers, for handlers that build responses.

kio types Kafka's fields nominally (``i32``, ``BrokerId``, ``i32Timedelta``, ``TZAware``...);
the constructors of the integer and id types (``i32(n)``, ``BrokerId(n)``) check the range.
Durations and timestamps need a conversion, here.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Final

from kio._kio_native import tz_aware_from_i64
from kio.static.primitive import TZAware, i32, i32Timedelta, i64, i64Timedelta

_MS = datetime.timedelta(milliseconds=1)


def ms32(ms: int) -> i32Timedelta:
    """A duration field of Kafka type int32 milliseconds (throttle times, timeouts)."""
    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms))


def ms64(ms: int) -> i64Timedelta:
    """A duration field of Kafka type int64 milliseconds (SaslAuthenticate's session lifetime)."""
    return i64Timedelta.parse(datetime.timedelta(milliseconds=ms))


INT_MAX: Final = 2**31 - 1  # Java's Integer.MAX_VALUE (Kafka's INT configs, int32 fields)
LONG_MAX: Final = 2**63 - 1  # Java's Long.MAX_VALUE
NO_THROTTLE: Final = ms32(0)
# authorized_operations when they were not asked for (Kafka's Integer.MIN_VALUE)
AUTHORIZED_OPERATIONS_OMITTED: Final = i32(-(2**31))
ZERO_UUID: Final = uuid.UUID(int=0)  # "no topic id"


def timestamp(ms: int) -> TZAware | None:
    """A timestamp field (Kafka int64 ms since the epoch, -1 for none)."""
    return None if ms < 0 else tz_aware_from_i64(i64(ms))


def millis(value: datetime.timedelta) -> int:
    """Whole milliseconds of a duration field."""
    return value // _MS

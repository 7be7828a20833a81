"""What a handler may answer besides a response: no response at all, or a closed connection.
Its own module so that handlers and the dispatcher both import it and neither imports the
other."""

from __future__ import annotations

import enum
from typing import Final


class NoResponse(enum.Enum):
    NO_RESPONSE = "no response"


NO_RESPONSE: Final = NoResponse.NO_RESPONSE  # a handler's answer when Kafka sends none (acks=0)


class CloseConnection(Exception):
    """Raised by a handler that must close the connection without answering: Kafka does this
    for a failed acks=0 produce, so the client notices and refreshes its metadata."""

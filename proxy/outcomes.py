"""What a handler may answer besides a response: no response at all, or a closed connection.
Its own module so that handlers and the dispatcher both import it and neither imports the
other."""

from __future__ import annotations

import enum
from typing import Final

from kio.schema.errors import ErrorCode


class NoResponse(enum.Enum):
    NO_RESPONSE = "no response"


NO_RESPONSE: Final = NoResponse.NO_RESPONSE  # a handler's answer when Kafka sends none (acks=0)


class CloseConnection(Exception):
    """Raised by a handler that must close the connection without answering: Kafka does this
    for a failed acks=0 produce, so the client notices and refreshes its metadata."""


class ErrorReply(Exception):
    """Raised by a handler to be answered with its API's error reply carrying ``code``: Kafka's
    handlers throw an ApiException (``authorizeClusterOperation``'s ClusterAuthorizationException)
    or send ``getErrorResponse`` for a request refused as a whole."""

    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code

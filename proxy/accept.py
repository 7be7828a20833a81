"""Accepting a connection as ``trio.serve_listeners`` does: when the process is out of
descriptors or memory (EMFILE, ENFILE, ENOMEM, ENOBUFS) the error is logged and the accept
retried after 0.1 s, so a broker or proxy at its limit keeps serving the connections it has and
takes new ones as they free up; any other OSError is the listener's end and propagates."""

from __future__ import annotations

import errno
import logging
import os
from typing import TypeVar

import trio

ACCEPT_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
ACCEPT_RETRY_S = 0.1

S = TypeVar("S", bound=trio.abc.Stream)


async def accept_retrying(listener: trio.abc.Listener[S], log: logging.Logger) -> S:
    """The next connection on ``listener``, waiting out a shortage of descriptors or memory."""
    while True:
        try:
            return await listener.accept()
        except OSError as exc:
            if exc.errno not in ACCEPT_CAPACITY_ERRNOS:
                raise
            log.error("accept: %s; retrying in %s s", os.strerror(exc.errno), ACCEPT_RETRY_S)
            await trio.sleep(ACCEPT_RETRY_S)

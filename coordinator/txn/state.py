"""Transaction states and the legal moves between them (pure: no trio, no clock, no storage).

Theory of operation
-------------------
Every transactional id owned by this coordinator has one ``TxnMetadata`` (``metadata.py``) whose
``state`` is one of ``TxnState``. The ids (0..7) are Kafka's, because they are written into
``__transaction_state`` records (``log_format.py``) and the names are Kafka's, because
DescribeTransactions/ListTransactions show them verbatim.

A transaction's life (transaction version 1, the classic flow every client uses)::

    Empty --AddPartitions/AddOffsets--> Ongoing --EndTxn(commit)--> PrepareCommit
      ^                                   |  \\                          | markers written
      |                                   |   `--EndTxn(abort)--> PrepareAbort
      |                                   |                            | markers written
      +------ InitProducerId ---- CompleteCommit / CompleteAbort <-----'
                                          |
                                          `--AddPartitions--> Ongoing (next transaction)

Fencing (InitProducerId while Ongoing, or the transaction timed out) goes
``Ongoing -> PrepareEpochFence -> PrepareAbort`` with the epoch bumped by one, then completes to
CompleteAbort like any abort. Ids that stay in a resting state (Empty, CompleteCommit,
CompleteAbort) longer than ``transactional.id.expiration.ms`` move to Dead: a tombstone is written
and the id leaves the cache.

Every move is one of ``EDGES``. A move is *prepared* (``TxnMetadata.prepare``: the move must be
in ``EDGES`` and no other move may be pending), its record is appended to the log, and only then
is it *completed* (``TxnMetadata.complete``). At most one move is pending per id; any request
that finds one pending gets CONCURRENT_TRANSACTIONS.

Two states are never written to the log: Dead (a tombstone is written instead) and
PrepareEpochFence. Kafka keeps PrepareEpochFence as a pending state for a moment while it turns
the fence into a PrepareAbort; here both hops are checked against ``EDGES`` and prepared in one
synchronous step (no await in between), so PrepareEpochFence is never even pending.

Transaction version 2 (KIP-890 part 2, ``supports_epoch_bump``): every EndTxn bumps the epoch in
its Prepare record (the markers carry the bumped epoch, so the partitions fence the finished
transaction's epoch), and the edges ``TV2_EDGES`` Empty/CompleteCommit/CompleteAbort ->
PrepareAbort (an "empty abort": the client aborts a transaction that added nothing, still to get
a fresh epoch) are legal for a transit whose client transaction version is 2. Which version a
transaction uses is the client's, per request (``decisions``), as Kafka chooses it.
"""

from __future__ import annotations

import enum
from typing import Final

__all__ = [
    "EDGES",
    "EXPIRABLE",
    "MAX_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "PREPARE",
    "RESTING",
    "TV2",
    "TV2_EDGES",
    "TxnState",
    "is_epoch_exhausted",
    "is_legal",
    "supports_epoch_bump",
]

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
MAX_EPOCH: Final = 32767  # Short.MaxValue: reserved for the coordinator's last fence
TV2: Final = 2  # the ``transaction.version`` (and client transaction version) of KIP-890 part 2


def supports_epoch_bump(transaction_version: int) -> bool:
    """Kafka's ``TransactionVersion.supportsEpochBump``: level 2 and above."""
    return transaction_version >= TV2


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka's ``isEpochExhausted``: clients never get Short.MaxValue, so one epoch is always
    left for fencing. At 32766 the next InitProducerId rotates to a new producer id."""
    return epoch >= MAX_EPOCH - 1


class TxnState(enum.IntEnum):
    """Kafka's ``TransactionState``; the value is the id stored in the log."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions/ListTransactions report ("PrepareCommit", ...)."""
        return _NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)


_NAMES: Final = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME: Final = {name: state for state, name in _NAMES.items()}

S = TxnState
RESTING: Final = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
"""No transaction open: InitProducerId may bump the epoch, the id may expire."""
EXPIRABLE: Final = RESTING  # Kafka's isExpirationAllowed
PREPARE: Final = frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT})
"""The decision is durable and markers are (being) written."""

# Every legal move (from, to), written once. Kafka lists the same data per target state as
# ``validPreviousStates`` (TransactionMetadata); TV1 only.
EDGES: Final[frozenset[tuple[TxnState, TxnState]]] = frozenset(
    [(s, S.EMPTY) for s in RESTING]  # InitProducerId: epoch bump or id rotation
    + [(s, S.ONGOING) for s in (*RESTING, S.ONGOING)]  # AddPartitions / AddOffsets
    + [(s, S.DEAD) for s in RESTING]  # transactional.id.expiration.ms
    + [
        (S.ONGOING, S.PREPARE_COMMIT),  # EndTxn(commit)
        (S.ONGOING, S.PREPARE_ABORT),  # EndTxn(abort)
        (S.ONGOING, S.PREPARE_EPOCH_FENCE),  # InitProducerId while Ongoing, or timeout
        (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT),  # ...which aborts with the bumped epoch
        (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),  # all markers written
        (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    ]
)


# TV2 only: EndTxn(abort) with nothing added ("empty abort"), which still bumps the epoch.
TV2_EDGES: Final[frozenset[tuple[TxnState, TxnState]]] = frozenset(
    (s, S.PREPARE_ABORT) for s in RESTING
)


def is_legal(src: TxnState, dst: TxnState, client_transaction_version: int = 0) -> bool:
    return (src, dst) in EDGES or (
        supports_epoch_bump(client_transaction_version) and (src, dst) in TV2_EDGES
    )

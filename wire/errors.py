"""Protocol errors (close the connection) and error codes (values in responses).

Two kinds of failure, kept apart as in style.md:

* ``ProtocolError`` and its subclasses are *exceptions*: the peer broke the protocol (bad
  framing, undecodable request, unknown API, version we do not serve). The connection logs one
  line and closes, as Kafka does.
* ``ErrorCode`` (re-exported from kio, one member per code of Kafka's ``Errors.java``) is a
  *value* that coordinators and storage return and handlers put in responses.

Code everywhere uses the newest error codes. Older request versions cannot understand some of
them, so ``translate_error`` rewrites them once, at encode time, from the single table
``TRANSLATIONS`` (spec eos.md §1.4). ``RETRIABLE`` is the Java client's retriable set (the
``RetriableException`` subclasses of ``Errors.java``, which kio records per code).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from kio.schema.errors import ErrorCode

if TYPE_CHECKING:
    from wire.headers import RequestHeader

__all__ = [
    "RETRIABLE",
    "TRANSLATIONS",
    "DecodeError",
    "ErrorCode",
    "FramingError",
    "ProtocolError",
    "UnknownApi",
    "UnsupportedVersion",
    "translate_error",
    "translations_for",
]


class ProtocolError(Exception):
    """The peer broke the protocol; the connection must be closed."""


class FramingError(ProtocolError):
    """Negative or oversized frame size, or the stream ended inside a frame."""


class DecodeError(ProtocolError):
    """A frame whose header or body does not parse."""


class UnknownApi(ProtocolError):
    """An API key we do not serve."""

    def __init__(self, header: RequestHeader) -> None:
        super().__init__(
            f"unknown api key {header.api_key} (correlation id {header.correlation_id})"
        )
        self.header = header
        self.api_key = header.api_key


class UnsupportedVersion(ProtocolError):
    """A version outside the advertised range (or one kio has no schema for).

    ``header`` is attached when the request header parsed, so the caller can answer an
    ApiVersions request per KIP-511 instead of closing.
    """

    def __init__(
        self,
        api_key: int,
        api_version: int,
        correlation_id: int | None = None,
        header: RequestHeader | None = None,
    ) -> None:
        corr = "" if correlation_id is None else f" (correlation id {correlation_id})"
        super().__init__(f"api key {api_key} version {api_version} is not supported{corr}")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.header = header


E = ErrorCode
_ALL_VERSIONS: Final = 1 << 15  # "below this version" for a rule that applies to every version

# (api key, new code) -> (first version that understands the new code, code older ones get).
TRANSLATIONS: Final[Mapping[tuple[int, ErrorCode], tuple[int, ErrorCode]]] = MappingProxyType(
    {
        # KIP-588: PRODUCER_FENCED is new; older versions get INVALID_PRODUCER_EPOCH.
        (22, E.producer_fenced): (4, E.invalid_producer_epoch),  # InitProducerId
        (24, E.producer_fenced): (2, E.invalid_producer_epoch),  # AddPartitionsToTxn
        (25, E.producer_fenced): (2, E.invalid_producer_epoch),  # AddOffsetsToTxn
        (26, E.producer_fenced): (2, E.invalid_producer_epoch),  # EndTxn
        # KIP-890: TRANSACTION_ABORTABLE is understood only from these versions on; Kafka sends
        # INVALID_TXN_STATE to older Produce ("Partition was not added to the transaction").
        (0, E.transaction_abortable): (11, E.invalid_txn_state),  # Produce
        (22, E.transaction_abortable): (5, E.invalid_txn_state),  # InitProducerId
        # AddPartitionsToTxn: only a VerifyOnly check answers it, and v4+ come from brokers;
        # Kafka 4.2's handler passes it to v4 as is (AddPartitionsToTxnManager maps it for old
        # Produce/TxnOffsetCommit clients). Clients' v0-3 never see it there; kept as a guard.
        (24, E.transaction_abortable): (4, E.invalid_txn_state),
        (25, E.transaction_abortable): (4, E.invalid_txn_state),  # AddOffsetsToTxn
        (26, E.transaction_abortable): (4, E.invalid_txn_state),  # EndTxn
        (28, E.transaction_abortable): (4, E.invalid_txn_state),  # TxnOffsetCommit
        (10, E.transaction_abortable): (5, E.invalid_txn_state),  # FindCoordinator
        # Produce-side transaction verification (KIP-890 part 1): coordinator answers are
        # rewritten for every Produce version; NOT_ENOUGH_REPLICAS is retriable without a
        # metadata refresh, and a fenced producer sees INVALID_PRODUCER_EPOCH on the data path.
        (0, E.producer_fenced): (_ALL_VERSIONS, E.invalid_producer_epoch),
        # From v12 (TV2, the partition added by the produce) CONCURRENT_TRANSACTIONS stays:
        # Kafka 4.2's ReplicaManager leaves it for supportsEpochBump (common while the last
        # transaction's markers are written; the client retries it).
        (0, E.concurrent_transactions): (12, E.not_enough_replicas),
        (0, E.coordinator_not_available): (_ALL_VERSIONS, E.not_enough_replicas),
        (0, E.coordinator_load_in_progress): (_ALL_VERSIONS, E.not_enough_replicas),
        (0, E.not_coordinator): (_ALL_VERSIONS, E.not_enough_replicas),
        (0, E.network_exception): (_ALL_VERSIONS, E.not_enough_replicas),
        # TxnOffsetCommit < 2 does not know COORDINATOR_LOAD_IN_PROGRESS.
        (28, E.coordinator_load_in_progress): (2, E.coordinator_not_available),
        # OffsetCommit < 9: a missing group with generation >= 0 is ILLEGAL_GENERATION.
        (8, E.group_id_not_found): (9, E.illegal_generation),
    }
)


@cache
def translations_for(api_key: int, api_version: int) -> Mapping[ErrorCode, ErrorCode]:
    """Every rewrite that applies to responses of (api_key, api_version); usually empty."""
    return MappingProxyType(
        {
            new: old
            for (key, new), (since, old) in TRANSLATIONS.items()
            if key == api_key and api_version < since
        }
    )


def translate_error(api_key: int, api_version: int, code: ErrorCode) -> ErrorCode:
    """The code a client speaking (api_key, api_version) must receive instead of ``code``."""
    return translations_for(api_key, api_version).get(code, code)


RETRIABLE: Final[frozenset[ErrorCode]] = frozenset(code for code in ErrorCode if code.retriable)

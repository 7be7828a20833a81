"""What a workload run does and how hard it is hit: the profiles, the topics and the broker's
fault-injection spec (kafkad's ``proxy/fault_injection.py``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    duration_s: float
    max_txns: int  # per producer instance
    producers: tuple[str, ...]  # client per transactional producer
    copiers: tuple[str, ...]  # client per consume-transform-produce copier
    readers: int
    faults: bool  # broker kills, crash points, injected errors (client kills: always)
    nemesis_every_s: tuple[float, float]
    txn_timeout_ms: int = 4000
    stall_s: float = 40.0
    abort_p: float = 0.2
    copier_abort_p: float = 0.15
    max_sends: int = 6
    pause_s: float = 0.05


CF, KP = "confluent", "kafka-python"
CFC = "confluent-consumer"  # confluent-kafka with group.protocol=consumer (KIP-848)
# kafkad's raw-protocol producer (kafkad/client/txn_producer.py): Java 4.x's transaction
# version 2 flow, and the same producer in the classic flow
TV2, RAWC = "tv2", "raw-classic"
PROFILES = {
    "short": Profile(
        duration_s=30,
        max_txns=10_000,
        producers=(CF, CF, KP),
        copiers=(CF, KP),
        readers=1,
        faults=True,
        nemesis_every_s=(5, 9),
    ),
    "long": Profile(
        duration_s=600,
        max_txns=1_000_000,
        producers=(CF, CF, KP, KP),
        copiers=(CF, CF, KP),
        readers=2,
        faults=True,
        nemesis_every_s=(6, 14),
    ),
    "calm": Profile(
        duration_s=20,
        max_txns=10_000,
        producers=(CF, KP),
        copiers=(KP,),
        readers=1,
        faults=False,
        nemesis_every_s=(5, 10),
    ),
    # the short profile with KIP-848 copiers (confluent-kafka, group.protocol=consumer)
    "kip848": Profile(
        duration_s=30,
        max_txns=10_000,
        producers=(CF, KP),
        copiers=(CFC, CFC),
        readers=1,
        faults=True,
        nemesis_every_s=(5, 9),
    ),
    # the short profile with TV2 producers and a TV2 copier beside classic ones
    "tv2": Profile(
        duration_s=30,
        max_txns=10_000,
        producers=(TV2, TV2, CF, KP),
        copiers=(TV2, KP),
        readers=1,
        faults=True,
        nemesis_every_s=(5, 9),
    ),
    # the short profile with the raw-protocol producer in the classic flow
    "raw-classic": Profile(
        duration_s=30,
        max_txns=10_000,
        producers=(RAWC, RAWC, CF),
        copiers=(RAWC, KP),
        readers=1,
        faults=True,
        nemesis_every_s=(5, 9),
    ),
    # load: no broker faults (its RSS and fds are sampled), clients killed and replaced
    "soak": Profile(
        duration_s=60,
        max_txns=1_000_000,
        producers=(CF, CF, CF, KP),
        copiers=(CF, KP),
        readers=2,
        faults=False,
        nemesis_every_s=(4, 8),
    ),
}

# Topics: data topics (name suffix, partitions); the copiers read IN and write OUT.
DATA = (("a", 3), ("b", 2))
IN, OUT = ("in", 2), ("out", 2)

# Retriable errors and stalls on the transactional APIs, drawn per request (kafkad's
# proxy/fault_injection.py). Produce is only failed before it is handled: idempotence dedupes
# what is retried after a drop_after. The rare 5 s stalls outlast the 4 s transaction timeout:
# a produce or AddPartitionsToTxn held that long lands after the coordinator aborted its
# transaction with a bumped epoch, and must be refused, not open a hanging transaction
# (eos.md §6.1); a stalled EndTxn races the timeout abort.
TXN_APIS = "init_producer_id,add_partitions_to_txn,add_offsets_to_txn,end_txn,txn_offset_commit"
FAULT_SPEC = "; ".join(
    [
        "find_coordinator:error=COORDINATOR_NOT_AVAILABLE@0.02",
        f"{TXN_APIS}:error=NOT_COORDINATOR@0.02",
        f"{TXN_APIS}:error=COORDINATOR_LOAD_IN_PROGRESS@0.02",
        "add_partitions_to_txn,add_offsets_to_txn,end_txn:error=CONCURRENT_TRANSACTIONS@0.03",
        "produce:error=REQUEST_TIMED_OUT@0.01",
        "produce:error=NOT_LEADER_OR_FOLLOWER@0.01",
        "produce,end_txn,txn_offset_commit:drop_after@0.005",
        "init_producer_id,add_partitions_to_txn,add_offsets_to_txn:drop_after@0.005",
        "produce,add_partitions_to_txn,end_txn,txn_offset_commit:delay=5000@0.002",
        "*:delay=40@0.02",
        "fetch,metadata,offset_fetch:drop@0.003",
        "crash=txn_after_prepare@0.001",
        "crash=txn_after_first_marker@0.002",
    ]
)

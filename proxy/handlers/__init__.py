"""One module per API (``partition_reassignments`` serves two): ``MODULES`` names each API
key's module, its Kafka name, the versions it advertises and, where lower, the first it
serves. Importing this package loads no handler: ``proxy.registry.entry(api_key)`` imports an
API's module on its first request, so start-up does not pay for every handler's kio classes
(about 70 ms); ``load_all()`` imports them all (tests, tools). The ``@handler`` decorator
checks that a module registers exactly what its row here says.
"""

from __future__ import annotations

import importlib

# api key -> (module, handler function name = Kafka's API name in snake case,
#             advertised (min, max) versions, min served version or None)
MODULES: dict[int, tuple[str, str, tuple[int, int], int | None]] = {
    0: ("produce", "produce", (0, 13), 3),
    1: ("fetch", "fetch", (4, 18), None),
    2: ("list_offsets", "list_offsets", (1, 11), None),
    3: ("metadata", "metadata", (0, 13), None),
    8: ("offset_commit", "offset_commit", (2, 10), None),
    9: ("offset_fetch", "offset_fetch", (1, 10), None),
    10: ("find_coordinator", "find_coordinator", (0, 6), None),
    11: ("join_group", "join_group", (0, 9), None),
    12: ("heartbeat", "heartbeat", (0, 4), None),
    13: ("leave_group", "leave_group", (0, 5), None),
    14: ("sync_group", "sync_group", (0, 5), None),
    15: ("describe_groups", "describe_groups", (0, 6), None),
    16: ("list_groups", "list_groups", (0, 5), None),
    17: ("sasl_handshake", "sasl_handshake", (0, 1), None),
    18: ("api_versions", "api_versions", (0, 4), None),
    19: ("create_topics", "create_topics", (2, 7), None),
    20: ("delete_topics", "delete_topics", (1, 6), None),
    21: ("delete_records", "delete_records", (0, 2), None),
    22: ("init_producer_id", "init_producer_id", (0, 5), None),
    23: ("offset_for_leader_epoch", "offset_for_leader_epoch", (2, 4), None),
    24: ("add_partitions_to_txn", "add_partitions_to_txn", (0, 5), None),
    25: ("add_offsets_to_txn", "add_offsets_to_txn", (0, 4), None),
    26: ("end_txn", "end_txn", (0, 5), None),
    27: ("write_txn_markers", "write_txn_markers", (1, 2), None),
    28: ("txn_offset_commit", "txn_offset_commit", (0, 5), None),
    29: ("describe_acls", "describe_acls", (1, 3), None),
    30: ("create_acls", "create_acls", (1, 3), None),
    31: ("delete_acls", "delete_acls", (1, 3), None),
    32: ("describe_configs", "describe_configs", (1, 4), None),
    33: ("alter_configs", "alter_configs", (0, 2), None),
    34: ("alter_replica_log_dirs", "alter_replica_log_dirs", (1, 2), None),
    35: ("describe_log_dirs", "describe_log_dirs", (1, 4), None),
    36: ("sasl_authenticate", "sasl_authenticate", (0, 2), None),
    37: ("create_partitions", "create_partitions", (0, 3), None),
    38: ("delegation_tokens", "create_delegation_token", (1, 3), None),
    39: ("delegation_tokens", "renew_delegation_token", (1, 2), None),
    40: ("delegation_tokens", "expire_delegation_token", (1, 2), None),
    41: ("delegation_tokens", "describe_delegation_token", (1, 3), None),
    42: ("delete_groups", "delete_groups", (0, 2), None),
    43: ("elect_leaders", "elect_leaders", (0, 2), None),
    44: ("incremental_alter_configs", "incremental_alter_configs", (0, 1), None),
    45: ("partition_reassignments", "alter_partition_reassignments", (0, 1), None),
    46: ("partition_reassignments", "list_partition_reassignments", (0, 0), None),
    47: ("offset_delete", "offset_delete", (0, 0), None),
    48: ("client_quotas", "describe_client_quotas", (0, 1), None),
    49: ("client_quotas", "alter_client_quotas", (0, 1), None),
    50: ("user_scram_credentials", "describe_user_scram_credentials", (0, 0), None),
    51: ("user_scram_credentials", "alter_user_scram_credentials", (0, 0), None),
    55: ("describe_quorum", "describe_quorum", (0, 2), None),
    57: ("update_features", "update_features", (0, 2), None),
    60: ("describe_cluster", "describe_cluster", (0, 2), None),
    61: ("describe_producers", "describe_producers", (0, 0), None),
    64: ("unregister_broker", "unregister_broker", (0, 0), None),
    65: ("describe_transactions", "describe_transactions", (0, 0), None),
    66: ("list_transactions", "list_transactions", (0, 2), None),
    68: ("consumer_group_heartbeat", "consumer_group_heartbeat", (0, 1), None),
    69: ("consumer_group_describe", "consumer_group_describe", (0, 1), None),
    71: ("get_telemetry_subscriptions", "get_telemetry_subscriptions", (0, 0), None),
    72: ("push_telemetry", "push_telemetry", (0, 0), None),
    74: ("list_config_resources", "list_config_resources", (0, 1), None),
    75: ("describe_topic_partitions", "describe_topic_partitions", (0, 0), None),
    80: ("raft_voters", "add_raft_voter", (0, 1), None),
    81: ("raft_voters", "remove_raft_voter", (0, 0), None),
}


def load(api_key: int) -> None:
    """Import the module serving ``api_key`` (registering its handler)."""
    importlib.import_module(f"proxy.handlers.{MODULES[api_key][0]}")


def load_all() -> None:
    for key in MODULES:
        load(key)

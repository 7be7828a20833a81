"""The (api key, version) table the wire tests cover: every version kio has a schema for, for
the API keys kafkad serves. Produce is advertised from 0 (KAFKA-18659) though v0-2 have no
schema; ``kio_versions`` lists what can actually be decoded."""

from __future__ import annotations

from kio.schema.index import api_key_map, schema_name_map

KEYS = (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 22, 24, 25, 26, 28, 32, 37)
KEYS += (60, 61, 65, 66)


def kio_versions(api_key: int) -> list[int]:
    return sorted(schema_name_map[api_key_map[api_key]])


SUPPORTED: dict[int, tuple[int, int]] = {
    key: (0 if key == 0 else min(kio_versions(key)), max(kio_versions(key))) for key in KEYS
}

PAIRS: list[tuple[int, int]] = [(key, v) for key in KEYS for v in kio_versions(key)]

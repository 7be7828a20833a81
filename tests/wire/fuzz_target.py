"""The one fuzz target, shared by the hypothesis tests and the atheris run (``make fuzz``).

``check(data)`` feeds ``data`` to the two entry points that take bytes from the network:

* ``wire.codec.decode_request`` with the versions kafkad serves (``proxy.registry.served()``):
  it may return, or raise a ``wire.errors.ProtocolError`` subclass, nothing else. A Rust abort
  in kio (see ``wire.bounds``) would kill the process, which the fuzzer reports as a crash.
* ``wire.records.validate_produce_batch``: it must return a ``ValidatedBatch`` or an
  ``ErrorCode``, never raise. It is given ``data`` itself and, when ``data`` decodes as a
  Produce request, every partition's ``records``.

Anything else raises ``TargetFailure`` (hypothesis shows the input; atheris saves it).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from proxy.registry import served
from wire.codec import decode_request
from wire.errors import ProtocolError
from wire.records import ValidatedBatch, validate_produce_batch

SERVED = served()
PRODUCE_KEY = 0


class TargetFailure(AssertionError):
    pass


def check_batch(data: bytes, produce_version: int) -> None:
    try:
        result = validate_produce_batch(
            data, produce_version=produce_version, max_message_bytes=1 << 20
        )
    except Exception as exc:
        raise TargetFailure(f"validate_produce_batch raised {exc!r}") from exc
    if not isinstance(result, ValidatedBatch | ErrorCode):
        raise TargetFailure(f"validate_produce_batch returned {result!r}")


def check(data: bytes) -> None:
    check_batch(data, 11)
    try:
        header, body = decode_request(data, SERVED)
    except ProtocolError:
        return
    except Exception as exc:
        raise TargetFailure(f"decode_request raised {exc!r}") from exc
    if header.api_key == PRODUCE_KEY:
        for topic in body.topic_data:
            for partition in topic.partition_data:
                if partition.records is not None:
                    check_batch(bytes(partition.records), header.api_version)

"""The compiled record scanner (wire/_record_kernel.c) and the Python reference give the same
answers on valid records, mutated records and random bytes, at every parameter."""

from __future__ import annotations

import os
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wire import record_kernel
from wire.record_codec import Record, encode_record
from wire.record_kernel import BAD, DONE, MORE, python_scan_records


def _compiler_present() -> bool:
    """A C compiler the install step would have used (then a missing kernel is a build failure)."""
    import sysconfig

    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc) is not None


try:
    from wire import _record_kernel as native
except ImportError:  # only a machine without a compiler (and not CI) may run without the kernel
    if os.environ.get("CI", "").lower() in ("1", "true", "yes") or _compiler_present():
        raise AssertionError(
            "wire._record_kernel is not built although a C compiler is present (or CI=true): "
            "the install step (pip install -e .) must compile wire/_record_kernel.c"
        ) from None
    pytest.skip("no C compiler: the Python scanner is used", allow_module_level=True)

I64 = st.integers(-(2**63), 2**63 - 1)
records = st.builds(
    Record,
    offset_delta=st.integers(-(2**31), 2**31 - 1),
    timestamp_delta=I64,
    key=st.none() | st.binary(max_size=20),
    value=st.none() | st.binary(max_size=40),
    headers=st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3),
)


@st.composite
def buffers(draw: st.DrawFn) -> bytes:
    buf = bytearray(b"".join(encode_record(r) for r in draw(st.lists(records, max_size=6))))
    for _ in range(draw(st.integers(0, 3))):  # mutate: overwrite, cut or insert bytes
        kind = draw(st.sampled_from(["set", "cut", "insert"]))
        at = draw(st.integers(0, len(buf)))
        if kind == "set" and at < len(buf):
            buf[at] = draw(st.integers(0, 255))
        elif kind == "cut":
            del buf[at : at + draw(st.integers(1, 4))]
        else:
            buf[at:at] = draw(st.binary(min_size=1, max_size=6))
    return bytes(buf)


def both(buf: bytes, *args: object) -> tuple[object, object]:
    out = []
    for fn in (python_scan_records, native.scan_records):
        keys: list[int] = []
        stamps: list[tuple[int, int, int | None]] = []
        result = fn(buf, *args, keys, stamps)  # type: ignore[operator]
        out.append((result, keys, stamps))
    return out[0], out[1]


@settings(max_examples=600, deadline=None)
@given(
    buf=buffers() | st.binary(max_size=80),
    start=st.integers(0, 3),
    max_records=st.integers(0, 8),
    first_index=st.integers(0, 3),
    base=I64,
    now=I64,
    before=st.sampled_from([2**63 - 1, 0, 1000, 3600000]) | I64,
    after=st.sampled_from([2**63 - 1, 0, 1000, 3600000]) | I64,
    check_ts=st.booleans(),
    need_keys=st.booleans(),
)
def test_native_and_python_agree(
    buf: bytes,
    start: int,
    max_records: int,
    first_index: int,
    base: int,
    now: int,
    before: int,
    after: int,
    check_ts: bool,
    need_keys: bool,
) -> None:
    start = min(start, len(buf))
    args = (
        start,
        len(buf),
        max_records,
        first_index,
        base,
        now,
        before,
        after,
        check_ts,
        need_keys,
    )
    py, c = both(buf, *args)
    assert py == c


def test_the_compiled_scanner_is_the_one_in_use() -> None:
    """When the extension is built, the produce path uses it (not the Python loop)."""
    assert record_kernel.NATIVE
    assert record_kernel.scan_records is native.scan_records


@pytest.mark.parametrize("fn", [python_scan_records, native.scan_records])
def test_statuses(fn: object) -> None:
    one = encode_record(Record(0, 5, b"k", b"v"))
    scan = fn  # type: ignore[assignment]
    args = (0, 0, 0, 0, False, False, [], [])
    assert scan(one * 2, 0, len(one) * 2, 2, 0, *args)[:3] == (DONE, len(one) * 2, 2)  # type: ignore[operator]
    assert scan(one, 0, len(one) - 1, 1, 0, *args)[:4] == (MORE, 0, 0, len(one))  # type: ignore[operator]
    assert scan(b"\xff" * 5, 0, 5, 1, 0, *args)[0] == BAD  # type: ignore[operator]
    assert scan(b"", 0, 0, 1, 0, *args)[:4] == (MORE, 0, 0, 0)  # type: ignore[operator]


def test_native_refuses_a_start_outside_the_buffer() -> None:
    """A negative (or past-the-end) start would read outside the buffer: refused, not read."""
    for pos in (-1, -(2**40), 4):
        with pytest.raises(ValueError):
            native.scan_records(b"abc", pos, 3, 1, 0, 0, 0, 0, 0, False, False, [], [])

"""Hypothesis strategies for kio types that ``st.from_type`` cannot resolve on its own."""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from typing import Any

from hypothesis import strategies as st
from kio.static.primitive import Records, i32Timedelta, i64Timedelta

st.register_type_strategy(Records, st.binary(max_size=64).map(Records))
# kio's own i64Timedelta strategy reaches values its reader cannot turn back into a timedelta
# (OverflowError near timedelta.max); real clients send -1 or a few days.
st.register_type_strategy(
    i64Timedelta,
    st.integers(-(10**15), 10**15).map(
        lambda ms: i64Timedelta.parse(datetime.timedelta(milliseconds=ms))
    ),
)
st.register_type_strategy(
    i32Timedelta,
    st.integers(-(2**31), 2**31 - 1).map(
        lambda ms: i32Timedelta.parse(datetime.timedelta(milliseconds=ms))
    ),
)


_ENTITIES: dict[type, st.SearchStrategy[Any]] = {}


def entities(cls: type) -> st.SearchStrategy[Any]:
    """Like ``st.from_type(cls)`` for a kio entity, with arrays capped at two elements:
    ``from_type`` works on kio entities but builds large nested responses slowly."""
    strategy = _ENTITIES.get(cls)
    if strategy is None:
        hints = typing.get_type_hints(cls)
        fields = {f.name: _strategy_for(hints[f.name]) for f in dataclasses.fields(cls)}
        strategy = _ENTITIES[cls] = st.builds(cls, **fields)
    return strategy


def _strategy_for(tp: Any) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        return st.none() | _strategy_for(inner)
    if origin is tuple:
        element = typing.get_args(tp)[0]
        return st.lists(_strategy_for(element), max_size=2).map(tuple)
    if dataclasses.is_dataclass(tp):
        return entities(tp)
    return st.from_type(tp)

"""Reading the typed records of a result document (`bench.extras`, `bench.config`): one
check per JSON type. A value of the wrong type raises `BadValue`; the record that holds it
is then kept as read, never guessed at. Numbers stay as read (an int stays an int), so a
document dumps back to the same bytes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


class BadValue(ValueError):
    """A recorded value of the wrong type."""


def num(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise BadValue
    return v


def opt_num(v: Any) -> float | None:
    return None if v is None else num(v)


def whole(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadValue
    return v


def opt_whole(v: Any) -> int | None:
    return None if v is None else whole(v)


def text(v: Any) -> str:
    if not isinstance(v, str):
        raise BadValue
    return v


def opt_text(v: Any) -> str | None:
    return None if v is None else text(v)


def flag(v: Any) -> bool:
    if not isinstance(v, bool):
        raise BadValue
    return v


def opt_flag(v: Any) -> bool | None:
    return None if v is None else flag(v)


def obj(v: Any) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise BadValue
    return v


def seq(v: Any, item: Callable[[Any], Any]) -> tuple[Any, ...]:
    if not isinstance(v, list | tuple):
        raise BadValue
    return tuple(item(x) for x in v)


def table(v: Any, item: Callable[[Any], Any]) -> dict[str, Any]:
    return {str(k): item(x) for k, x in obj(v).items()}

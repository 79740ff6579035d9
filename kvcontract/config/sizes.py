"""Capacities: offload blocks as an integer, or sizes such as ``"16GiB"``, parsed once and strictly."""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Annotated

from pydantic import (
    ByteSize,
    Field,
    PlainValidator,
    WithJsonSchema,
)

from kvcontract.config.errors import shown_value
from kvcontract.config.limits import ConfigLimits

_SIZE_UNITS: Mapping[str, int] = {
    "B": 1,
    **{f"{prefix}B": 1000 ** (power + 1) for power, prefix in enumerate("KMGTP")},
    **{f"{prefix}iB": 1024 ** (power + 1) for power, prefix in enumerate("KMGTP")},
}
"""The units a size takes, matched without regard to case: decimal (``GB``) and binary (``GiB``)."""
_UNITS_BY_CASE = {unit.lower(): factor for unit, factor in _SIZE_UNITS.items()}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$", re.IGNORECASE)
_SIZE_FORMS = f'a number and a unit ({", ".join(_SIZE_UNITS)}), such as "16GiB" or "1.5 TB"'
_CAPACITY_HELP = f"give offload blocks as an integer >= 1 (no quotes), or a size: {_SIZE_FORMS}"


def parse_size(text: str) -> int:
    """The bytes that ``text`` names: a number and one unit of a fixed list, nothing else around them.

    Raises ``ValueError`` naming the accepted forms (pydantic's ``ByteSize`` reads only a prefix,
    so ``"4000000%"`` and ``"64MiB!!"`` meant something; here they are refused).
    """
    match = _SIZE.match(text)
    factor = _UNITS_BY_CASE.get(match.group(2).lower()) if match else None
    if match is None or factor is None:
        raise ValueError(f"{text[:80]!r} is not a size: write {_SIZE_FORMS}")
    return int(Fraction(match.group(1)) * factor)


def _parse_capacity(value: object) -> int:
    """Blocks stay an ``int``; a size string becomes a :class:`ByteSize`, resolved with the layout."""
    if isinstance(value, bool):
        raise ValueError(f"capacity: {_CAPACITY_HELP}")
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"capacity {shown_value(value)} is below one block: {_CAPACITY_HELP}")
        if value > ConfigLimits.MAX_CAPACITY_BLOCKS:
            raise ValueError(
                f"capacity {shown_value(value)} is more than the limit of {ConfigLimits.MAX_CAPACITY_BLOCKS} blocks"
            )
        return value
    if isinstance(value, str):
        try:
            size = ByteSize(parse_size(value))
        except ValueError:
            where = "; percentages of a trace's blocks are for kvcontract plan" if value.strip().endswith("%") else ""
            raise ValueError(f"capacity is not understood: {_CAPACITY_HELP}{where}") from None
        if size > ConfigLimits.MAX_TIER_BYTES:
            raise ValueError(
                f"capacity {value!r} is more than the limit of "
                f"{ByteSize(ConfigLimits.MAX_TIER_BYTES).human_readable()} of any capacity"
            )
        return size
    raise ValueError(f"capacity: {_CAPACITY_HELP}")


Capacity = Annotated[
    int,
    PlainValidator(_parse_capacity),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 1, "description": "offload blocks"},
                {
                    "type": "string",
                    "pattern": r"^\s*\d+(\.\d+)?\s*([KkMmGgTtPp][Ii]?)?[Bb]\s*$",
                    "description": f"a size: {_SIZE_FORMS}",
                },
            ]
        }
    ),
    Field(description='Offload blocks as an integer, or a size such as "16GiB" turned into blocks.'),
]
"""A capacity: offload blocks (an integer) or a size string, turned into blocks from the layout."""

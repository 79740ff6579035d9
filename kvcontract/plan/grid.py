"""The capacity grid a plan covers, from what an operator writes: ``1%..50%``, ``1GiB..512GiB``, ``2%,5%,10%``.

A percentage is of the trace's unique blocks, a size is turned into blocks with the size of one
offload block, and a bare integer is blocks. ``A..B`` spans ``points`` capacities spaced evenly
on a log scale, both ends included; a comma-separated list names each capacity.
"""

from __future__ import annotations

import re

import numpy as np

from kvcontract.config import parse_size

__all__ = ["GridError", "parse_capacity_grid"]

_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
_BLOCKS = re.compile(r"^\s*\d+\s*$")
_MAX_POINTS = 1000


class GridError(ValueError):
    """A capacity grid that cannot be read; the message names the bad part and the accepted forms."""


def parse_capacity_grid(text: str, *, unique_blocks: int, block_bytes: int | None, points: int = 20) -> list[int]:
    """The capacities in blocks that ``text`` names, ascending, each at least one block."""
    if not 1 <= points <= _MAX_POINTS:
        raise GridError(f"points {points}: give between 1 and {_MAX_POINTS} capacities for a range")
    if ".." in text:
        low_text, _, high_text = text.partition("..")
        low = _blocks(low_text, unique_blocks, block_bytes)
        high = _blocks(high_text, unique_blocks, block_bytes)
        if high < low:
            raise GridError(f"capacities {text!r}: the range ends below its start; write low..high")
        spaced = np.geomspace(low, high, num=points) if points > 1 else np.array([low])
        grid = {max(1, round(float(value))) for value in spaced}
    else:
        grid = {_blocks(part, unique_blocks, block_bytes) for part in text.split(",")}
    return sorted(grid)


def _blocks(text: str, unique_blocks: int, block_bytes: int | None) -> int:
    """One capacity in blocks: a percentage of the unique blocks, a size, or a block count."""
    percent = _PERCENT.match(text)
    if percent:
        share = float(percent.group(1))
        if not 0 < share <= 100:
            raise GridError(f"capacity {text.strip()!r}: a percentage of the unique blocks is in (0%, 100%]")
        return max(1, round(unique_blocks * share / 100))
    if _BLOCKS.match(text):
        blocks = int(text)
        if blocks < 1:
            raise GridError(f"capacity {text.strip()!r}: give at least one block")
        return blocks
    try:
        size = parse_size(text)
    except ValueError:
        raise GridError(
            f"capacity {text.strip()!r} is not understood: give a percentage (5%), a size (8GiB) or blocks (4096)"
        ) from None
    if block_bytes is None:
        raise GridError(
            f"capacity {text.strip()!r} is a size: give --block-bytes N or --config FILE to turn it into blocks"
        )
    blocks = size // block_bytes
    if blocks < 1:
        raise GridError(f"capacity {text.strip()!r} holds no block of {block_bytes} bytes; give a larger size")
    return blocks

"""Cost of the runtime call checks: nanoseconds per contract call with checks off and on.

``python tools/bench_enforce.py`` prints one row per contract method of a minimal manager.
"""

from __future__ import annotations

import argparse
import timeit
from collections.abc import Callable, Iterable, Sequence

from rich.console import Console
from rich.table import Table
from typing_extensions import override

from kvcontract import (
    BlockIdsSpec,
    LookupResult,
    ManagerStats,
    OffloadingManager,
    OffloadKey,
    PrepareStoreOutput,
    ReqContext,
    make_offload_key,
)
from kvcontract.enforce import configure


class NullManager(OffloadingManager):
    """Does nothing, so a call costs only the call and its checks."""

    @override
    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
        return LookupResult.MISS

    @override
    def prepare_load(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> BlockIdsSpec:
        return EMPTY_SPEC

    @override
    def touch(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> None:
        return None

    @override
    def prepare_store(
        self, keys: Sequence[OffloadKey], req_context: ReqContext
    ) -> PrepareStoreOutput | None:
        return None

    @override
    def complete_store(
        self, keys: Iterable[OffloadKey], req_context: ReqContext, success: bool = True
    ) -> None:
        return None

    @override
    def stats(self) -> ManagerStats:
        return ManagerStats(capacity=0, used=0)

    @override
    def reset_cache(self) -> None:
        return None


EMPTY_SPEC = BlockIdsSpec(())


def per_call_ns(call: Callable[[], object], number: int, repeat: int) -> float:
    """Best-of-``repeat`` nanoseconds per call of ``call``."""
    return min(timeit.repeat(call, number=number, repeat=repeat)) / number * 1e9


def main() -> None:
    """Measure each method with checks off, then on, and print the difference."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--number", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--keys", type=int, default=16, help="keys per Sequence argument")
    args = parser.parse_args()

    manager = NullManager()
    ctx = ReqContext("bench")
    keys = [make_offload_key(i.to_bytes(8, "big")) for i in range(args.keys)]
    calls: dict[str, Callable[[], object]] = {
        "lookup(key)": lambda: manager.lookup(keys[0], ctx),
        "touch(keys)": lambda: manager.touch(keys, ctx),
        "prepare_load(keys)": lambda: manager.prepare_load(keys, ctx),
        "prepare_store(keys)": lambda: manager.prepare_store(keys, ctx),
        "complete_store(keys)": lambda: manager.complete_store(keys, ctx),
    }
    timings: dict[str, dict[bool, float]] = {name: {} for name in calls}
    for checks in (False, True):
        configure(checks=checks)
        for name, call in calls.items():
            timings[name][checks] = per_call_ns(call, args.number, args.repeat)

    table = Table(title=f"Contract call cost, ns per call ({args.keys} keys per Sequence)")
    for column in ("call", "checks off", "checks on", "added by checks"):
        table.add_column(column, justify="right")
    for name, by_checks in timings.items():
        added = by_checks[True] - by_checks[False]
        table.add_row(name, f"{by_checks[False]:.0f}", f"{by_checks[True]:.0f}", f"{added:.0f}")
    Console().print(table)


if __name__ == "__main__":
    main()

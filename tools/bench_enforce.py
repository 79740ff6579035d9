"""Cost of the runtime call checks: CPU time added per contract call, for every manager method.

``python tools/bench_enforce.py`` times each contract method of a manager that does nothing,
with checks off and on, in interleaved rounds (the order flips every round) on the working
thread's CPU clock, and prints the median over rounds of the time added per call and of the
on/off ratio. The target (issue 15) is at most 0.35 us added per call in the default mode;
``--mode full`` measures the O(n) mode instead.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterable, Sequence

from rich.console import Console
from rich.table import Table
from typing_extensions import override

from kvcontract import (
    BlockIdsSpec,
    LookupResult,
    ManagerStats,
    OffloadingEvent,
    OffloadingManager,
    OffloadKey,
    PrepareStoreOutput,
    ReqContext,
    make_offload_key,
)
from kvcontract.enforce import configure

TARGET_NS = 350.0
"""Issue 15: at most 0.35 us added per contract call by the default checks."""


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
    def complete_load(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        return None

    @override
    def prepare_store(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> PrepareStoreOutput | None:
        return None

    @override
    def complete_store(self, keys: Iterable[OffloadKey], req_context: ReqContext, success: bool = True) -> None:
        return None

    @override
    def on_request_finished(self, req_context: ReqContext) -> None:
        return None

    @override
    def take_events(self) -> list[OffloadingEvent]:
        return []

    @override
    def stats(self) -> ManagerStats:
        return STATS

    @override
    def reset_cache(self) -> None:
        return None

    @override
    def shutdown(self) -> None:
        return None


EMPTY_SPEC = BlockIdsSpec(())
STATS = ManagerStats(capacity=0, used=0)


def calls_of(manager: OffloadingManager, keys: list[OffloadKey]) -> dict[str, Callable[[], object]]:
    """One call of every contract method, with ``keys`` where it takes keys.

    Each call looks its method up anew, so it meets the wrapper or the original that
    :func:`configure` put on the class for the current round.
    """
    ctx = ReqContext("bench")
    return {
        "lookup(key)": lambda: manager.lookup(keys[0], ctx),
        "prepare_load(keys)": lambda: manager.prepare_load(keys, ctx),
        "touch(keys)": lambda: manager.touch(keys, ctx),
        "complete_load(keys)": lambda: manager.complete_load(keys, ctx),
        "prepare_store(keys)": lambda: manager.prepare_store(keys, ctx),
        "complete_store(keys)": lambda: manager.complete_store(keys, ctx),
        "on_request_finished()": lambda: manager.on_request_finished(ctx),
        "take_events()": lambda: manager.take_events(),
        "stats()": lambda: manager.stats(),
        "reset_cache()": lambda: manager.reset_cache(),
        "shutdown()": lambda: manager.shutdown(),
    }


def per_call_ns(call: Callable[[], object], number: int) -> float:
    """CPU nanoseconds of the working thread per call of ``call``, over ``number`` calls."""
    started = time.thread_time()
    for _ in range(number):
        call()
    return (time.thread_time() - started) / number * 1e9


def measure(
    calls: dict[str, Callable[[], object]], full: bool, rounds: int, number: int
) -> dict[str, tuple[list[float], list[float]]]:
    """Per method, the per-call times with checks off and on, one pair per round."""
    timings: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in calls}
    for round_index in range(rounds):
        order = (False, True) if round_index % 2 == 0 else (True, False)
        for checks in order:
            configure(checks=checks, full=full)
            for name, call in calls.items():
                timings[name][checks].append(per_call_ns(call, number))
    configure(checks=True, full=False)
    return timings


def main() -> None:
    """Measure every method, checks off and on round by round, and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--number", type=int, default=20_000, help="calls per method and round")
    parser.add_argument("--keys", type=int, default=16, help="keys per Sequence argument")
    parser.add_argument("--mode", choices=("on", "full"), default="on")
    args = parser.parse_args()

    keys = [make_offload_key(i.to_bytes(8, "big")) for i in range(args.keys)]
    calls = calls_of(NullManager(), keys)
    timings = measure(calls, args.mode == "full", args.rounds, args.number)

    table = Table(
        title=f"Contract call cost, CPU ns per call, checks {args.mode} vs off "
        f"({args.keys} keys per Sequence, median of {args.rounds} interleaved rounds)"
    )
    for column in ("call", "checks off", f"checks {args.mode}", "added", "ratio"):
        table.add_column(column, justify="right")
    worst = 0.0
    for name, (off, on) in timings.items():
        added = statistics.median(b - a for a, b in zip(off, on))
        ratio = statistics.median(b / a for a, b in zip(off, on))
        worst = max(worst, added)
        table.add_row(
            name,
            f"{statistics.median(off):.0f}",
            f"{statistics.median(on):.0f}",
            f"{added:.0f}",
            f"{ratio:.2f}x",
        )
    console = Console()
    console.print(table)
    if args.mode == "on":
        verdict = "meets" if worst <= TARGET_NS else "misses"
        console.print(f"worst added {worst:.0f} ns per call: {verdict} the {TARGET_NS:.0f} ns target")


if __name__ == "__main__":
    main()

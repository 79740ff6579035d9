"""Cost of class creation for contract implementers: a module of 20 subclasses, with and without the hint rule.

``python tools/bench_class_creation.py`` executes the same generated module (8 policies, 8
managers, 2 tiers, 2 workers, each overriding its contract's methods with the contract's own
hints, as implementations do) in interleaved rounds, alternately with the override-hint rule of
:mod:`kvcontract.contracts.enforcement.signatures` and without it (the ``@override`` rule and
the call-check wrapping run in both), on the working thread's CPU clock. It prints the median
time per module of each, and the median of the per-round ratios.

``--cold`` runs each round in a fresh interpreter instead, so the first class of each contract
pays the contract's hints and beartype's first ``is_subhint`` verdicts, as an import does.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import CodeType

ROOT = Path(__file__).resolve().parents[1]

_POLICY = """
class Policy{n}(LRUPolicy):
    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        super().touch(keys)

    @override
    def insert(self, key: OffloadKey, block: BlockStatus) -> None:
        super().insert(key, block)

    @override
    def evict(self, n: int, protected: Set[OffloadKey]) -> list[tuple[OffloadKey, BlockStatus]] | None:
        return super().evict(n, protected)

    @override
    def remove(self, key: OffloadKey) -> None:
        super().remove(key)
"""

_MANAGER = """
class Manager{n}(OffloadingManager):
    @override
    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
        return LookupResult.MISS

    @override
    def prepare_load(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> BlockIdsSpec:
        return BlockIdsSpec(())

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
    def stats(self) -> ManagerStats:
        return ManagerStats(capacity=0, used=0)

    @override
    def reset_cache(self) -> None:
        return None
"""

_TIER = """
class Tier{n}(SecondaryTier):
    @override
    def lookup(self, key: OffloadKey) -> LookupResult:
        return LookupResult.MISS

    @override
    def submit_store(self, job: TierJob) -> bool:
        return False

    @override
    def submit_load(self, job: TierJob) -> bool:
        return False

    @override
    def get_finished(self) -> list[TransferResult]:
        return []

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        return None
"""

_WORKER = """
class Worker{n}(OffloadingWorker):
    @override
    def submit_store(self, job_id: int, src: GPULoadStoreSpec, dst: LoadStoreSpec) -> bool:
        return False

    @override
    def submit_load(self, job_id: int, src: LoadStoreSpec, dst: GPULoadStoreSpec) -> bool:
        return False

    @override
    def get_finished(self) -> list[TransferResult]:
        return []

    @override
    def wait(self, job_ids: Collection[int]) -> None:
        return None
"""

HEADER = """from __future__ import annotations
from collections.abc import Collection, Iterable, Sequence, Set
from typing_extensions import override
from kvcontract import (
    BlockIdsSpec, BlockStatus, GPULoadStoreSpec, LoadStoreSpec, LookupResult, ManagerStats, OffloadingManager,
    OffloadingWorker, OffloadKey, PrepareStoreOutput, ReqContext, SecondaryTier, TierJob, TransferResult,
)
from kvcontract.policies import LRUPolicy
"""


def module_source() -> str:
    """The module of 20 subclasses: 8 policies, 8 managers, 2 tiers, 2 workers."""
    kinds = [_POLICY] * 8 + [_MANAGER] * 8 + [_TIER] * 2 + [_WORKER] * 2
    return HEADER + "".join(kind.format(n=n) for n, kind in enumerate(kinds))


def create_module(code: CodeType) -> float:
    """CPU seconds of this thread to execute the module's code once (its 20 class statements)."""
    namespace: dict[str, object] = {"__name__": "bench_subclasses"}
    started = time.thread_time()
    exec(code, namespace)  # the generated module above
    return time.thread_time() - started


def hint_rule(on: bool) -> None:
    """Put the override-hint rule in class processing, or take it out (a no-op in its place)."""
    from kvcontract.contracts.enforcement import classes, signatures

    def unchecked(cls: type) -> None:
        return None

    setattr(classes, "check_override_signatures", signatures.check_override_signatures if on else unchecked)


def warm_rounds(rounds: int, number: int) -> tuple[list[float], list[float]]:
    """Per round, seconds per module without and with the rule, the order flipping every round."""
    importlib.import_module("kvcontract")  # before timing: the package's import is not class creation

    code = compile(module_source(), "bench_subclasses.py", "exec")
    without: list[float] = []
    with_rule: list[float] = []
    for index in range(rounds):
        for on in (False, True) if index % 2 == 0 else (True, False):
            hint_rule(on)
            spent = statistics.median(create_module(code) for _ in range(number))
            (with_rule if on else without).append(spent)
    hint_rule(True)
    return without, with_rule


def cold_rounds(rounds: int) -> tuple[list[float], list[float]]:
    """Per round, seconds for the module in a fresh interpreter without and with the rule."""
    without: list[float] = []
    with_rule: list[float] = []
    for index in range(rounds):
        for on in (False, True) if index % 2 == 0 else (True, False):
            output = subprocess.run(
                [sys.executable, __file__, "--one-cold", "on" if on else "off"],
                capture_output=True,
                text=True,
                check=True,
                env={
                    **os.environ,
                    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                },
            ).stdout
            (with_rule if on else without).append(float(output.split()[-1]))
    return without, with_rule


def one_cold(on: bool) -> None:
    """In a fresh interpreter: time the module once and print the seconds."""
    importlib.import_module("kvcontract")  # before timing: the package's import is not class creation

    hint_rule(on)
    print(create_module(compile(module_source(), "bench_subclasses.py", "exec")))


def main() -> None:
    """Measure, then print the medians and the median per-round ratio."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--number", type=int, default=20, help="modules per round and side (warm), median taken")
    parser.add_argument("--cold", action="store_true", help="each round in a fresh interpreter")
    parser.add_argument("--one-cold", choices=("on", "off"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_cold:
        one_cold(args.one_cold == "on")
        return
    without, with_rule = cold_rounds(args.rounds) if args.cold else warm_rounds(args.rounds, args.number)
    ratios = [after / before for before, after in zip(without, with_rule)]
    kind = "cold (fresh interpreter)" if args.cold else "warm"
    print(f"class creation, module of 20 subclasses, {kind}, {args.rounds} interleaved rounds, thread CPU time")
    print(f"  without the hint rule: {statistics.median(without) * 1e3:8.2f} ms per module")
    print(f"  with the hint rule:    {statistics.median(with_rule) * 1e3:8.2f} ms per module")
    added = statistics.median(a - b for a, b in zip(with_rule, without)) / 20 * 1e6
    print(f"  added per class:       {added:8.1f} us (median of rounds)")
    print(f"  ratio with/without:    {statistics.median(ratios):8.2f} (median of per-round ratios)")


if __name__ == "__main__":
    main()

"""Deliberately broken components: each breaks one rule of its contract, for the kit to catch."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence, Set

from typing_extensions import override

from kvcontract import (
    BlockIdsSpec,
    BlockStatus,
    GPULoadStoreSpec,
    LoadStoreSpec,
    LookupResult,
    OffloadingEvent,
    OffloadingWorker,
    OffloadKey,
    PrepareStoreOutput,
    ReqContext,
    SecondaryTier,
    TierJob,
    TransferResult,
)
from kvcontract.managers import CPUOffloadingManager
from kvcontract.policies.lru import LRUPolicy
from kvcontract.tiers import FileTier


class ShortEvict(LRUPolicy):
    """Returns one victim too few."""

    @override
    def evict(self, n: int, protected: Set[OffloadKey]) -> list[tuple[OffloadKey, BlockStatus]] | None:
        victims = super().evict(n, protected)
        return victims[:-1] if victims else victims


class NonAtomicEvict(LRUPolicy):
    """Evicts what it can, then answers None when it cannot find all n."""

    @override
    def evict(self, n: int, protected: Set[OffloadKey]) -> list[tuple[OffloadKey, BlockStatus]] | None:
        victims = super().evict(n, protected)
        if victims is None and n > 1:
            super().evict(1, protected)
        return victims


class TakesProtected(LRUPolicy):
    """Ignores the protected set."""

    @override
    def evict(self, n: int, protected: Set[OffloadKey]) -> list[tuple[OffloadKey, BlockStatus]] | None:
        return super().evict(n, frozenset())


class TakesPinned(LRUPolicy):
    """Takes the least recent blocks whatever their reference count."""

    @override
    def evict(self, n: int, protected: Set[OffloadKey]) -> list[tuple[OffloadKey, BlockStatus]] | None:
        if n < 0:
            raise ValueError("n < 0")
        candidates = [key for key in list(self._blocks) if key not in protected][:n]
        if len(candidates) < n:
            return None
        victims = [(key, self._blocks[key]) for key in candidates]
        for key in candidates:
            self.remove(key)
        return victims


class IgnoresTouch(LRUPolicy):
    """An LRU that forgets to move touched blocks: its victims differ from a real LRU's."""

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        return None


class DuplicateVictims(LRUPolicy):
    """Names its first victim twice."""

    @override
    def evict(self, n: int, protected: Set[OffloadKey]) -> list[tuple[OffloadKey, BlockStatus]] | None:
        victims = super().evict(n, protected)
        if victims and n > 1:
            return [victims[0], *victims[:-1]]
        return victims


class Overfills(LRUPolicy):
    """Accepts inserts past its capacity."""

    @override
    def insert(self, key: OffloadKey, block: BlockStatus) -> None:
        self._capacity += 1
        super().insert(key, block)


class ForgetsRemove(LRUPolicy):
    """Keeps a removed block."""

    @override
    def remove(self, key: OffloadKey) -> None:
        return None


class HalfInsertMany(LRUPolicy):
    """Inserts keys one by one and stops at the first it cannot take: not all or nothing."""

    @override
    def insert_many(self, keys: Sequence[OffloadKey], blocks: Sequence[BlockStatus]) -> None:
        for key, block in zip(keys, blocks):
            self.insert(key, block)


class LosesPins(CPUOffloadingManager):
    """Unpins a load as soon as it is prepared."""

    @override
    def prepare_load(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> BlockIdsSpec:
        spec = super().prepare_load(keys, req_context)
        super().complete_load(keys, req_context)
        return spec

    @override
    def complete_load(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        return None


class KeepsFailedStores(CPUOffloadingManager):
    """Makes blocks readable even when their store failed."""

    @override
    def complete_store(self, keys: Iterable[OffloadKey], req_context: ReqContext, success: bool = True) -> None:
        super().complete_store(keys, req_context, True)


class ServesAnotherKey(SecondaryTier):
    """A file tier that answers every load with the block stored last."""

    def __init__(self, inner: SecondaryTier) -> None:
        self._inner = inner
        self._last: OffloadKey | None = None

    @override
    def lookup(self, key: OffloadKey) -> LookupResult:
        return self._inner.lookup(key)

    @override
    def submit_store(self, job: TierJob) -> bool:
        self._last = job.keys[-1]
        return self._inner.submit_store(job)

    @override
    def submit_load(self, job: TierJob) -> bool:
        keys = [self._last or key for key in job.keys]
        return self._inner.submit_load(TierJob(job.job_id, keys, job.host_block_ids))

    @override
    def get_finished(self) -> list[TransferResult]:
        return self._inner.get_finished()

    @override
    def take_events(self) -> list[OffloadingEvent]:
        return self._inner.take_events()

    @override
    def shutdown(self) -> None:
        self._inner.shutdown()


class LoadsWrongBlock(OffloadingWorker):
    """A torch worker that loads into the GPU block after the one asked for."""

    def __init__(self, inner: OffloadingWorker, gpu_blocks: int) -> None:
        self._inner = inner
        self._gpu_blocks = gpu_blocks

    @override
    def submit_store(self, job_id: int, src: GPULoadStoreSpec, dst: LoadStoreSpec) -> bool:
        return self._inner.submit_store(job_id, src, dst)

    @override
    def submit_load(self, job_id: int, src: LoadStoreSpec, dst: GPULoadStoreSpec) -> bool:
        shifted = GPULoadStoreSpec([(int(block) + 1) % self._gpu_blocks for block in dst.block_ids])
        return self._inner.submit_load(job_id, src, shifted)

    @override
    def get_finished(self) -> list[TransferResult]:
        return self._inner.get_finished()

    @override
    def wait(self, job_ids: Collection[int]) -> None:
        self._inner.wait(job_ids)

    @override
    def shutdown(self) -> None:
        self._inner.shutdown()


class CopiesTouchedKeys(LRUPolicy):
    """Annotated as the contract says, but calls a list method on ``keys``: a tuple breaks it."""

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        copied: list[OffloadKey] = getattr(keys, "copy")()  # a list method, which the contract does not give
        super().touch(copied)


class ConcatenatesStores(CPUOffloadingManager):
    """Appends to its ``keys`` as if they were a list: a tuple or a bare Sequence breaks it."""

    @override
    def prepare_store(self, keys: Sequence[OffloadKey], req_context: ReqContext) -> PrepareStoreOutput | None:
        return super().prepare_store(keys + [], req_context)  # type: ignore[operator]  # pyright: ignore[reportOperatorIssue, reportUnknownArgumentType]  # a list's +: the broken case under test


class CountsLoadsDone(CPUOffloadingManager):
    """Takes ``len()`` of the ``Iterable`` its ``complete_load`` is given: a one-pass iterator breaks it."""

    @override
    def complete_load(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        self.loads_done = len(keys)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]  # noqa: KVC005  # len() of an Iterable: the broken case under test
        super().complete_load(keys, req_context)


class ReadsStoresTwice(CPUOffloadingManager):
    """Passes over the ``Iterable`` its ``complete_store`` is given twice: the second pass of an iterator is empty."""

    @override
    def complete_store(self, keys: Iterable[OffloadKey], req_context: ReqContext, success: bool = True) -> None:
        self.stored_now = sum(1 for _ in keys)
        super().complete_store(keys, req_context, success)


class IndexesJobIds(LoadsWrongBlock):
    """Waits for ``job_ids[0]`` alone: a set, which a ``Collection`` may be, has no index."""

    @override
    def submit_load(self, job_id: int, src: LoadStoreSpec, dst: GPULoadStoreSpec) -> bool:
        return self._inner.submit_load(job_id, src, dst)

    @override
    def wait(self, job_ids: Collection[int]) -> None:
        self._inner.wait([job_ids[0]])  # type: ignore[index]  # pyright: ignore[reportIndexIssue, reportUnknownArgumentType]  # indexing a Collection: the broken case under test


class SortsTouchedKeys(FileTier):
    """A file tier that sorts the keys it is told to touch in place, as if they were a list."""

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        getattr(keys, "sort")()  # a list method, which the contract does not give
        super().touch(keys)


def corrupt_file_block(tier: SecondaryTier, key: OffloadKey) -> None:
    """Flip the last byte of ``key``'s block file in a file tier."""
    assert isinstance(tier, FileTier)
    path = tier.block_path(key)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))

"""An out-of-tree tier as another package would write one: blocks kept as bytes in this process's memory.

Named in a config as ``kind: "tests.assembly.memory_tier:MemoryTier"``, its ``options`` the
keywords of its constructor besides ``host_blocks`` and ``identity``; docs/config.md shows it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import torch
from typing_extensions import override

from kvcontract import BlockIdentity, LookupResult, OffloadKey, SecondaryTier, TierJob, TransferResult


class MemoryTier(SecondaryTier):
    """Up to ``capacity`` blocks as bytes, least recently used dropped first; every job finishes when it is submitted."""

    def __init__(self, host_blocks: torch.Tensor, *, identity: BlockIdentity, capacity: int = 64) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1 block, got {capacity}")
        self.identity = identity
        self._host = host_blocks
        self._capacity = capacity
        self._blocks: OrderedDict[OffloadKey, bytes] = OrderedDict()
        self._finished: list[TransferResult] = []

    @override
    def lookup(self, key: OffloadKey) -> LookupResult:
        return LookupResult.HIT if key in self._blocks else LookupResult.MISS

    @override
    def submit_store(self, job: TierJob) -> bool:
        for key, host_id in zip(job.keys, job.host_block_ids):
            self._blocks[key] = self._host[host_id].numpy().tobytes()
            self._blocks.move_to_end(key)
            if len(self._blocks) > self._capacity:
                self._blocks.popitem(last=False)
        self._finished.append(TransferResult(job.job_id, True, len(job.keys) * int(self._host.shape[1])))
        return True

    @override
    def submit_load(self, job: TierJob) -> bool:
        if any(key not in self._blocks for key in job.keys):
            return False
        for key, host_id in zip(job.keys, job.host_block_ids):
            self._host[host_id] = torch.frombuffer(bytearray(self._blocks[key]), dtype=torch.uint8)
        self._finished.append(TransferResult(job.job_id, True, len(job.keys) * int(self._host.shape[1])))
        return True

    @override
    def get_finished(self) -> list[TransferResult]:
        finished, self._finished = self._finished, []
        return finished

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        for key in reversed(keys):
            if key in self._blocks:
                self._blocks.move_to_end(key)


class NotATier:
    """A class a config may name by mistake: it does not inherit SecondaryTier."""

"""Keys and blocks for the policy and manager tests."""

from __future__ import annotations

from collections.abc import Sequence, Set

from typing_extensions import override

from kvcontract import BlockStatus, OffloadKey, make_offload_key
from kvcontract.policies import available_policies

POLICY_NAMES = ("lru", "arc", "s3fifo", "sieve", "prefix_reuse")
"""The built-in policies; every one of them must pass the shared tests."""

assert set(POLICY_NAMES) <= set(available_policies())


def key(number: int) -> OffloadKey:
    """The offload key of block ``number``, as the trace replay builds it."""
    return make_offload_key(number.to_bytes(8, "big"))


def keys(*numbers: int) -> list[OffloadKey]:
    """The keys of ``numbers``, in order."""
    return [key(number) for number in numbers]


def ready(block_id: int = 0) -> BlockStatus:
    """A readable, evictable block."""
    return BlockStatus(block_id, ref_cnt=0)


class ModelPolicy:
    """A reference model of a built-in policy: plain lists that keep every block in its place.

    A parked block stays in its list, only invisible to scans, so "returns to its place"
    needs no bookkeeping here. ``evict`` follows ``PolicyBase``: re-check ``n`` parked
    blocks (oldest parking first), a full re-check before failing, and a scan that parks
    only when it succeeds.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.blocks: dict[OffloadKey, BlockStatus] = {}
        self.parked: list[OffloadKey] = []

    def insert(self, key: OffloadKey, block: BlockStatus) -> None:
        self.blocks[key] = block
        self.place(key)

    def remove(self, key: OffloadKey) -> None:
        if self.blocks.pop(key, None) is not None:
            if key in self.parked:
                self.parked.remove(key)
            self.forget(key)

    def mark_evictable(self, key: OffloadKey) -> None:
        if key in self.parked and self.blocks[key].ref_cnt == 0:
            self.parked.remove(key)

    def evict(self, n: int, protected: Set[OffloadKey]) -> list[OffloadKey] | None:
        if n == 0:
            return []
        self.recheck(n)
        if n > self.candidates(protected):
            self.recheck(len(self.parked))
            if n > self.candidates(protected):
                return None
        victims = self.select(n, protected)
        if victims is None:
            self.recheck(len(self.parked))
            victims = self.select(n, protected)
            if victims is None:
                return None
        for victim in victims:
            del self.blocks[victim]
        return victims

    def candidates(self, protected: Set[OffloadKey]) -> int:
        return sum(1 for key in self.blocks if key not in self.parked and key not in protected)

    def recheck(self, count: int) -> None:
        for _ in range(min(count, len(self.parked))):
            key = self.parked.pop(0)
            if self.blocks[key].ref_cnt:
                self.parked.append(key)

    def busy(self, key: OffloadKey) -> bool:
        return self.blocks[key].ref_cnt != 0

    def place(self, key: OffloadKey) -> None:
        raise NotImplementedError

    def forget(self, key: OffloadKey) -> None:
        raise NotImplementedError

    def touch(self, keys: Sequence[OffloadKey]) -> None:
        raise NotImplementedError

    def select(self, n: int, protected: Set[OffloadKey]) -> list[OffloadKey] | None:
        raise NotImplementedError


class LRUModel(ModelPolicy):
    """LRU: one list, least recent first; a touch moves a block to the end and unparks it."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.order: list[OffloadKey] = []

    @override
    def place(self, key: OffloadKey) -> None:
        self.order.append(key)

    @override
    def forget(self, key: OffloadKey) -> None:
        self.order.remove(key)

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        for key in reversed(keys):
            if key in self.blocks:
                self.order.remove(key)
                self.order.append(key)
                if key in self.parked:
                    self.parked.remove(key)

    @override
    def select(self, n: int, protected: Set[OffloadKey]) -> list[OffloadKey] | None:
        victims: list[OffloadKey] = []
        busy: list[OffloadKey] = []
        for key in self.order:
            if len(victims) == n:
                break
            if key in self.parked or key in protected:
                continue
            (busy if self.busy(key) else victims).append(key)
        if len(victims) < n:
            return None
        self.order = [key for key in self.order if key not in victims]
        self.parked += busy
        return victims


class ARCModel(ModelPolicy):
    """ARC: T1 and T2 hold every block of theirs, parked ones included, so ``|T1|`` counts them."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.t1: list[OffloadKey] = []
        self.t2: list[OffloadKey] = []
        self.b1: list[OffloadKey] = []
        self.b2: list[OffloadKey] = []
        self.target = 0.0

    @override
    def place(self, key: OffloadKey) -> None:
        if key in self.b1:
            self.target = min(float(self.capacity), self.target + max(1.0, len(self.b2) / len(self.b1)))
            self.b1.remove(key)
            self.t2.append(key)
        elif key in self.b2:
            self.target = max(0.0, self.target - max(1.0, len(self.b1) / len(self.b2)))
            self.b2.remove(key)
            self.t2.append(key)
        else:
            self.t1.append(key)
            if self.b1 and len(self.t1) + len(self.b1) > self.capacity:
                self.b1.pop(0)

    @override
    def forget(self, key: OffloadKey) -> None:
        (self.t1 if key in self.t1 else self.t2).remove(key)

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        for key in reversed(keys):
            if key not in self.blocks:
                continue
            if key in self.parked:
                self.parked.remove(key)
            if key in self.t1:
                self.t1.remove(key)
                (self.t1 if self.blocks[key].ref_cnt < 0 else self.t2).append(key)
            else:
                self.t2.remove(key)
                self.t2.append(key)

    @override
    def select(self, n: int, protected: Set[OffloadKey]) -> list[OffloadKey] | None:
        busy: list[OffloadKey] = []
        queues = {1: iter(self.t1), 2: iter(self.t2)}

        def next_candidate(which: int) -> OffloadKey | None:
            for key in queues[which]:
                if key in self.parked or key in protected:
                    continue
                if self.busy(key):
                    busy.append(key)
                    continue
                return key
            return None

        from_t1: list[OffloadKey] = []
        from_t2: list[OffloadKey] = []
        t1_left = len(self.t1)
        while len(from_t1) + len(from_t2) < n:
            first, second = (1, 2) if t1_left > self.target else (2, 1)
            key = next_candidate(first)
            which = first
            if key is None:
                key, which = next_candidate(second), second
                if key is None:
                    break
            (from_t1 if which == 1 else from_t2).append(key)
            t1_left -= which == 1
        if len(from_t1) + len(from_t2) < n:
            return None
        self.parked += busy
        self.t1 = [key for key in self.t1 if key not in from_t1]
        self.t2 = [key for key in self.t2 if key not in from_t2]
        self.b1 += from_t1
        self.b2 += from_t2
        del self.b1[: max(0, len(self.t1) + len(self.b1) - self.capacity)]
        del self.b2[: max(0, len(self.b1) + len(self.b2) - self.capacity)]
        return from_t1 + from_t2


class S3FIFOModel(ModelPolicy):
    """S3-FIFO: the scan walks each queue with a cursor; blocks it cannot evict stay where they are."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.small: list[OffloadKey] = []
        self.main: list[OffloadKey] = []
        self.ghost: list[OffloadKey] = []
        self.freq: dict[OffloadKey, int] = {}
        small_target = max(1, int(capacity * 0.1))
        self.main_target = capacity - small_target
        self.ghost_limit = max(1, self.main_target)

    @override
    def place(self, key: OffloadKey) -> None:
        self.freq[key] = 0
        if key in self.ghost:
            self.ghost.remove(key)
            self.main.append(key)
        else:
            self.small.append(key)

    @override
    def forget(self, key: OffloadKey) -> None:
        (self.small if key in self.small else self.main).remove(key)
        del self.freq[key]

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        for key in keys:
            if key not in self.blocks:
                continue
            if self.freq[key] < 3 and self.blocks[key].ref_cnt >= 0:
                self.freq[key] += 1
            if key in self.parked and self.blocks[key].ref_cnt == 0:
                self.parked.remove(key)

    @override
    def select(self, n: int, protected: Set[OffloadKey]) -> list[OffloadKey] | None:
        small, main, freq = list(self.small), list(self.main), dict(self.freq)
        cursors = {"small": 0, "main": 0}
        queues = {"small": small, "main": main}
        busy: list[OffloadKey] = []
        victims: list[OffloadKey] = []
        from_small: set[OffloadKey] = set()

        def visible(name: str) -> list[int]:
            queue = queues[name]
            return [i for i in range(cursors[name], len(queue)) if queue[i] not in self.parked and queue[i] not in busy]

        while len(victims) < n:
            in_main, in_small = visible("main"), visible("small")
            if in_main and (len(in_main) > self.main_target or not in_small):
                name, index = "main", in_main[0]
            elif in_small:
                name, index = "small", in_small[0]
            else:
                break
            queue = queues[name]
            key = queue[index]
            cursors[name] = index
            if freq[key]:
                del queue[index]
                main.append(key)
                freq[key] = 0 if name == "small" else min(freq[key], 3) - 1
            elif key in protected:
                cursors[name] = index + 1
            elif self.busy(key):
                busy.append(key)
                cursors[name] = index + 1
            else:
                del queue[index]
                victims.append(key)
                if name == "small":
                    from_small.add(key)
        if len(victims) < n:
            return None
        self.small, self.main, self.freq = small, main, freq
        self.parked += busy
        for key in victims:
            del self.freq[key]
        self.ghost += [key for key in victims if key in from_small]
        del self.ghost[: max(0, len(self.ghost) - self.ghost_limit)]
        return victims


class SIEVEModel(ModelPolicy):
    """SIEVE: one list from tail to head and the hand's index in it; nothing is ever parked."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.queue: list[OffloadKey] = []
        self.visited: dict[OffloadKey, bool] = {}
        self.hand = 0

    @override
    def place(self, key: OffloadKey) -> None:
        self.queue.append(key)
        self.visited[key] = False

    @override
    def forget(self, key: OffloadKey) -> None:
        index = self.queue.index(key)
        if index < self.hand:
            self.hand -= 1
        del self.queue[index]
        del self.visited[key]

    @override
    def touch(self, keys: Sequence[OffloadKey]) -> None:
        for key in keys:
            if key in self.blocks and self.blocks[key].ref_cnt >= 0:
                self.visited[key] = True

    @override
    def select(self, n: int, protected: Set[OffloadKey]) -> list[OffloadKey] | None:
        queue, visited, hand = list(self.queue), dict(self.visited), self.hand
        victims: list[OffloadKey] = []
        steps_left = 2 * len(queue) + 2
        while len(victims) < n and steps_left:
            steps_left -= 1
            if hand == len(queue):
                if not queue:
                    break
                hand = 0
            key = queue[hand]
            if key in protected:
                hand += 1
            elif visited[key] or self.busy(key):
                visited[key] = False
                hand += 1
            else:
                victims.append(key)
                del queue[hand]
                del visited[key]
        if len(victims) < n:
            return None
        self.queue, self.visited, self.hand = queue, visited, hand
        return victims

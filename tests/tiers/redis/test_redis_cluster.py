"""The Redis tier on a real local Redis Cluster of three masters: spread keys, slots moved between nodes, a node stopped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kvcontract import LookupResult, OffloadKey
from kvcontract.tiers import RedisTier
from tests.tiers.redis.support import (
    HOST,
    MakeTier,
    RedisClusterServers,
    RedisServer,
    fill,
    job_counter,
    key,
    load,
    pattern,
    settle,
    store,
)

KEYS = 12


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RedisClusterServers]:
    """A cluster of the test's own, which it may reshard or stop."""
    servers = RedisClusterServers(tmp_path / "cluster")
    yield servers
    servers.stop()


def _node_of(cluster: RedisClusterServers, tier: RedisTier, k: OffloadKey) -> RedisServer:
    slot = int(cluster.nodes[0].command("CLUSTER", "KEYSLOT", tier.redis_key(k)))
    for node in cluster.nodes:
        if int(node.command("CLUSTER", "COUNTKEYSINSLOT", slot)) or _serves(node, slot):
            return node
    raise AssertionError(f"no node serves slot {slot}")


def _serves(node: RedisServer, slot: int) -> bool:
    myself = node.command("CLUSTER", "MYID").decode()
    for start, end, master, *_ in node.command("CLUSTER", "SLOTS"):
        if int(start) <= slot <= int(end):
            return bool(master[2].decode() == myself)
    return False


def _move_slot(
    cluster: RedisClusterServers, slot: int, source: RedisServer, target: RedisServer, *, finish: bool
) -> None:
    """Migrate ``slot``'s keys from ``source`` to ``target``; leave the slot MIGRATING/IMPORTING unless ``finish``."""
    source_id = source.command("CLUSTER", "MYID").decode()
    target_id = target.command("CLUSTER", "MYID").decode()
    target.command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
    source.command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
    names = source.command("CLUSTER", "GETKEYSINSLOT", slot, 1000)
    if names:
        source.command("MIGRATE", HOST, target.port, "", 0, 5000, "KEYS", *names)
    if finish:
        for node in cluster.nodes:
            node.command("CLUSTER", "SETSLOT", slot, "NODE", target_id)


def test_keys_spread_over_the_nodes_and_round_trip(
    redis_cluster: RedisClusterServers, make_tier: MakeTier, host: torch.Tensor
) -> None:
    tier = make_tier(cluster_nodes=redis_cluster.addresses)
    jobs = job_counter()
    keys = [key(i) for i in range(KEYS)]
    fill(host, range(KEYS), range(KEYS))
    assert store(tier, jobs, keys, list(range(KEYS))).success
    owners = {_node_of(redis_cluster, tier, k).port for k in keys}
    assert len(owners) > 1, "the tag groups spread keys over several nodes"
    host.zero_()
    assert load(tier, jobs, keys, list(range(KEYS))).success
    for i in range(KEYS):
        assert torch.equal(host[i], pattern(i))
    other = make_tier(cluster_nodes=redis_cluster.addresses, namespace=tier.namespace)
    assert all(settle(other, k) is LookupResult.HIT for k in keys)


@pytest.mark.parametrize("finish", [True, False], ids=["moved", "ask"])
def test_a_key_moved_between_nodes_still_loads(
    cluster: RedisClusterServers, make_tier: MakeTier, host: torch.Tensor, finish: bool
) -> None:
    tier = make_tier(cluster_nodes=cluster.addresses)
    jobs = job_counter()
    fill(host, [0, 1], [1, 2])
    assert store(tier, jobs, [key(1), key(2)], [0, 1]).success
    source = _node_of(cluster, tier, key(1))
    target = next(node for node in cluster.nodes if node is not source)
    slot = int(source.command("CLUSTER", "KEYSLOT", tier.redis_key(key(1))))
    _move_slot(cluster, slot, source, target, finish=finish)
    host[4:6].zero_()
    assert load(tier, jobs, [key(1), key(2)], [4, 5]).success
    assert torch.equal(host[4], pattern(1)) and torch.equal(host[5], pattern(2))
    fill(host, [2], [3])
    assert store(tier, jobs, [key(3)], [2]).success
    assert load(tier, jobs, [key(3)], [6]).success and torch.equal(host[6], pattern(3))


def test_a_stopped_node_s_keys_miss_and_the_rest_work(
    cluster: RedisClusterServers, make_tier: MakeTier, host: torch.Tensor
) -> None:
    tier = make_tier(cluster_nodes=cluster.addresses, socket_timeout=0.5)
    jobs = job_counter()
    keys = [key(i) for i in range(KEYS)]
    fill(host, range(KEYS), range(KEYS))
    assert store(tier, jobs, keys, list(range(KEYS))).success
    stopped = _node_of(cluster, tier, keys[0])
    lost = [k for k in keys if _node_of(cluster, tier, k) is stopped]
    kept = [k for k in keys if k not in lost]
    assert kept, "some keys live on the other nodes"
    stopped.stop()
    host[12:16].fill_(9)
    assert not load(tier, jobs, lost[:4], list(range(12, 12 + len(lost[:4])))).success
    assert not host[12 : 12 + len(lost[:4])].any(), "the failed load's host blocks are zero-filled"
    reader = make_tier(
        cluster_nodes=[address for address in cluster.addresses if address[1] != stopped.port],
        namespace=tier.namespace,
        socket_timeout=0.5,
    )
    assert all(settle(reader, k) is LookupResult.MISS for k in lost)
    assert all(settle(reader, k) is LookupResult.HIT for k in kept)
    positions = [keys.index(k) for k in kept[:4]]
    host[12:16].zero_()
    assert load(tier, jobs, kept[:4], list(range(12, 12 + len(positions)))).success
    for offset, i in enumerate(positions):
        assert torch.equal(host[12 + offset], pattern(i))
    assert settle(tier, lost[0]) is LookupResult.MISS

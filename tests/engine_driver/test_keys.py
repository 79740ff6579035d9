"""The offload keys of block hash ids, the one key builder of traces, replays and benchmarks."""

from __future__ import annotations

from kvcontract import make_offload_key, offload_key_group, offload_key_hash
from kvcontract.engine_driver.keys import block_key, key_chains
from kvcontract.sim import block_key as public_block_key


def test_block_keys_are_eight_byte_big_endian_hashes_in_group_zero() -> None:
    assert block_key(258) == make_offload_key(b"\x00\x00\x00\x00\x00\x00\x01\x02")
    assert offload_key_hash(block_key(7)) == (7).to_bytes(8, "big")
    assert offload_key_group(block_key(7)) == 0


def test_the_simulation_exports_the_same_builder() -> None:
    assert public_block_key is block_key


def test_equal_ids_share_one_key_object_across_requests() -> None:
    first, second = key_chains([[1, 2, 3], [1, 2, 4]])
    assert first == [block_key(1), block_key(2), block_key(3)]
    assert second[0] is first[0] and second[1] is first[1]
    assert second[2] == block_key(4)


def test_an_empty_request_has_an_empty_chain() -> None:
    assert key_chains([[], [5]]) == [[], [block_key(5)]]

"""The integrity key: its file's checks, the sealed value formats (remote and file), and the file tier under a stranger."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvcontract import LookupResult, OffloadingEvent
from kvcontract.testing import example_identity
from kvcontract.tiers.file import block_file
from kvcontract.tiers.file.block_dir import BlockDirectory
from kvcontract.tiers.integrity import (
    IntegrityKeyError,
    SecretFileError,
    ValueMac,
    read_integrity_key,
)
from kvcontract.tiers.store_value import BadValueError, decode_value, encode_value
from tests.tiers.support import BLOCK_BYTES, MakeTier, fill, key, load, pattern, store

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
FINGERPRINT = example_identity(64).fingerprint


def _key_file(tmp_path: Path, content: bytes = KEY, mode: int = 0o600) -> Path:
    path = tmp_path / "key"
    path.write_bytes(content)
    path.chmod(mode)
    return path


def test_a_private_key_file_gives_its_bytes(tmp_path: Path) -> None:
    assert read_integrity_key(_key_file(tmp_path)) == KEY


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o666])
def test_a_key_file_others_may_touch_is_refused_naming_the_fix(tmp_path: Path, mode: int) -> None:
    path = _key_file(tmp_path, mode=mode)
    with pytest.raises(SecretFileError, match=f"chmod 600 {path}"):
        read_integrity_key(path)


def test_a_short_key_a_symlink_and_a_missing_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(IntegrityKeyError, match="at least 32 random bytes"):
        read_integrity_key(_key_file(tmp_path, b"short"))
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "key")
    with pytest.raises(SecretFileError, match="not a symlink"):
        read_integrity_key(link)
    with pytest.raises(SecretFileError, match="cannot open"):
        read_integrity_key(tmp_path / "absent")
    with pytest.raises(IntegrityKeyError, match="at least 32"):
        ValueMac(b"x" * 31)


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_a_key_file_of_another_user_is_refused(tmp_path: Path) -> None:
    path = _key_file(tmp_path)
    os.chown(path, 12345, 12345)
    with pytest.raises(SecretFileError, match="belongs to uid 12345"):
        read_integrity_key(path)


def test_the_key_is_never_shown() -> None:
    assert KEY.hex() not in repr(ValueMac(KEY)) and str(KEY) not in repr(ValueMac(KEY))


@given(payload=st.binary(min_size=64, max_size=64), at=st.integers(0, 10_000), flip=st.integers(1, 255))
def test_any_changed_byte_of_a_sealed_value_is_refused(payload: bytes, at: int, flip: int) -> None:
    mac = ValueMac(KEY)
    value = bytearray(encode_value(key(1), FINGERPRINT, memoryview(payload), mac))
    assert bytes(decode_value(bytes(value), key(1), FINGERPRINT, 64, mac)) == payload
    value[at % len(value)] ^= flip
    with pytest.raises(BadValueError):
        decode_value(bytes(value), key(1), FINGERPRINT, 64, mac)


@pytest.mark.parametrize("writer", ["no key", "another key"])
def test_a_value_not_sealed_with_the_readers_key_is_forged(writer: str) -> None:
    payload = memoryview(bytes(64))
    value = encode_value(key(1), FINGERPRINT, payload, None if writer == "no key" else ValueMac(OTHER_KEY))
    with pytest.raises(BadValueError) as caught:
        decode_value(value, key(1), FINGERPRINT, 64, ValueMac(KEY))
    assert caught.value.forged and not caught.value.checksum_failed


def test_a_reader_without_the_key_refuses_a_sealed_value() -> None:
    value = encode_value(key(1), FINGERPRINT, memoryview(bytes(64)), ValueMac(KEY))
    with pytest.raises(BadValueError, match="integrity_key_file") as caught:
        decode_value(value, key(1), FINGERPRINT, 64)
    assert caught.value.forged


def test_the_mac_covers_the_identity_and_the_key() -> None:
    mac = ValueMac(KEY)
    other_identity = example_identity(64, model="other").fingerprint
    with pytest.raises(BadValueError) as caught:
        decode_value(encode_value(key(1), other_identity, memoryview(bytes(64)), mac), key(1), FINGERPRINT, 64, mac)
    assert caught.value.identity_mismatch
    with pytest.raises(BadValueError, match="another key"):
        decode_value(encode_value(key(2), FINGERPRINT, memoryview(bytes(64)), mac), key(1), FINGERPRINT, 64, mac)


def test_file_tiers_holding_one_key_share_blocks(make_tier: MakeTier, job_ids: Iterator[int]) -> None:
    writer = make_tier(integrity_key=KEY)
    fill(writer._host, [0], [5])  # pyright: ignore[reportPrivateUsage]  # the host buffer of the fixture
    assert store(writer, job_ids, [key(1)], [0]).success
    writer.shutdown()
    reader = make_tier(integrity_key=KEY)
    assert reader.lookup(key(1)) is LookupResult.HIT
    assert load(reader, job_ids, [key(1)], [3]).success
    assert bytes(reader._host[3].numpy()) == bytes(pattern(5).numpy())  # pyright: ignore[reportPrivateUsage]


@pytest.mark.parametrize("stranger", ["no key", "another key"])
def test_a_block_file_a_stranger_planted_is_a_miss_an_event_and_counted(
    make_tier: MakeTier, tmp_path: Path, job_ids: Iterator[int], stranger: str
) -> None:
    identity = example_identity(BLOCK_BYTES)
    tier = make_tier(integrity_key=KEY)
    directory = BlockDirectory(tmp_path / "cache", identity.fingerprint_hex)
    with directory.locate(key(1), create=True) as location:
        block_file.write_block(
            location,
            key(1),
            memoryview(pattern(9).numpy().tobytes()),
            fingerprint=identity.fingerprint,
            mac=None if stranger == "no key" else ValueMac(OTHER_KEY),
        )
    tier.shutdown()
    tier = make_tier(integrity_key=KEY)
    assert tier.lookup(key(1)) is LookupResult.HIT, "the scan reads headers only"
    tier.take_events()
    tier._host[2].fill_(7)  # pyright: ignore[reportPrivateUsage]
    result = load(tier, job_ids, [key(1)], [2])
    assert not result.success
    assert not tier._host[2].any(), "no planted byte reaches a host block"  # pyright: ignore[reportPrivateUsage]
    assert tier.take_events() == [OffloadingEvent([key(1)], "FILE", removed=True)]
    assert tier.stats().forged_values == 1 and tier.stats().checksum_failures == 0
    assert tier.lookup(key(1)) is LookupResult.MISS
    assert not os.path.exists(directory.path_of(key(1))), "the planted file is deleted"


def test_a_file_tier_without_the_key_refuses_sealed_blocks(make_tier: MakeTier, job_ids: Iterator[int]) -> None:
    sealed = make_tier(integrity_key=KEY)
    assert store(sealed, job_ids, [key(1)], [0]).success
    sealed.shutdown()
    plain = make_tier()
    assert not load(plain, job_ids, [key(1)], [1]).success
    assert plain.stats().forged_values == 1

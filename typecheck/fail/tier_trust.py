"""Integrity keys, Redis access and remote-tier limits given as the wrong types."""

from __future__ import annotations

from pathlib import Path

from kvcontract.tiers.redis.client import RedisAccess
from kvcontract.tiers.remote_tier import RemoteTierOptions
from kvcontract.tiers.integrity import ValueMac, read_integrity_key

key_as_text = ValueMac("thirty-two characters of a secret")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
key_file_as_text: bytes = read_integrity_key("key")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
deadline_as_text = RemoteTierOptions(job_deadline="10")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
ca_as_text = RedisAccess(tls_ca_file="ca.pem")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
right = RedisAccess(tls_ca_file=Path("ca.pem")), RemoteTierOptions(job_deadline=10.0)

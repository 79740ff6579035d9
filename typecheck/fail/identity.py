"""Misuse of the block identity and of the tiers that carry it."""

from __future__ import annotations

from pathlib import Path

import torch

from kvcontract import BlockIdentity
from kvcontract.testing import example_identity
from kvcontract.tiers import FileTier, RedisTier

host = torch.zeros((4, 4096), dtype=torch.uint8)
identity = example_identity(4096)
identity.model = "another"  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue]
BlockIdentity("m", "", "bfloat16", 1, 0, 0, 16, 16, 4096)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
FileTier(Path("/tmp/tier"), 4, host)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
RedisTier(host, layout="x", url="redis://127.0.0.1:6379/0")  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
example_identity(4096, head_dim=64)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]

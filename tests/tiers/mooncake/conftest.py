"""Fixtures of the Mooncake tier tests: one store for the session, tiers that shut down after the test.

Without Mooncake's client or ``mooncake_master`` the test modules here are not collected
and ``test_requirements.py`` skips with the one reason; ``KVCONTRACT_REQUIRE=mooncake``
(CI) makes that skip a failure.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
import torch

from kvcontract import BlockIdentity
from kvcontract.tiers import MooncakeTier
from kvcontract.tiers.mooncake import tier as mooncake_tier
from kvcontract.tiers.remote_tier import RemoteTierOptions
from tests.tiers.mooncake.support import MakeTier, MooncakeStore, missing_reason, tier_on
from tests.tiers.support import EVENTS_ON

collect_ignore_glob = [] if missing_reason() is None else ["test_mooncake_*.py"]
_namespaces = itertools.count()


@pytest.fixture(scope="session")
def mooncake_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MooncakeStore]:
    """One master, metadata server and segment for the session."""
    store = MooncakeStore(tmp_path_factory.mktemp("mooncake"))
    yield store
    store.close()


@pytest.fixture
def make_tier(mooncake_store: MooncakeStore, host: torch.Tensor) -> Iterator[MakeTier]:
    """Builds tiers on the session store in the test's own namespace; all are shut down after the test."""
    tiers: list[MooncakeTier] = []
    default_namespace = f"t{next(_namespaces)}"

    def make(
        *,
        namespace: str | None = None,
        host_blocks: torch.Tensor | None = None,
        identity: BlockIdentity | None = None,
        lookup_timeout: float = 10.0,
        io_threads: int = 2,
        start_degraded: bool = False,
        integrity_key: bytes | None = None,
        options: RemoteTierOptions = EVENTS_ON,
        master: str | None = None,
    ) -> MooncakeTier:
        tier = tier_on(
            mooncake_store,
            host if host_blocks is None else host_blocks,
            namespace=namespace or default_namespace,
            identity=identity,
            lookup_timeout=lookup_timeout,
            io_threads=io_threads,
            start_degraded=start_degraded,
            integrity_key=integrity_key,
            options=options,
            master=master,
        )
        tiers.append(tier)
        return tier

    yield make
    for tier in tiers:
        tier.shutdown()


@pytest.fixture(params=["copied", "zero-copy"])
def value_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways a value travels: the tests' small blocks copied through the slot, or zero copy (the threshold lowered to them)."""
    path = str(request.param)
    if path == "zero-copy":
        monkeypatch.setattr(mooncake_tier, "ZERO_COPY_FROM", 0)
    return path

"""Fixtures of the Mooncake tier tests: one store for the session, tiers that shut down after the test.

Without Mooncake's client or ``mooncake_master`` the test modules here are not collected
and ``test_requirements.py`` skips with the one reason; ``KVCONTRACT_REQUIRE=mooncake``
(CI) makes that skip a failure.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace
from typing import Protocol

import pytest
import torch

from kvcontract import BlockIdentity
from kvcontract.testing import example_identity
from kvcontract.tiers import MooncakeTier
from kvcontract.tiers.mooncake import tier as mooncake_tier
from kvcontract.tiers.remote_tier import RemoteTierOptions
from tests.tiers.mooncake.support import MooncakeStore, missing_reason
from tests.tiers.support import EVENTS_ON

collect_ignore_glob = [] if missing_reason() is None else ["test_mooncake_*.py"]
_namespaces = itertools.count()


class MakeTier(Protocol):
    """Builds a tier on the session's store in the test's namespace, unless told otherwise."""

    def __call__(
        self,
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
    ) -> MooncakeTier: ...


@pytest.fixture(scope="session")
def mooncake_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MooncakeStore]:
    """One master, metadata server and segment for the session."""
    store = MooncakeStore(tmp_path_factory.mktemp("mooncake"))
    yield store
    store.close()


def tier_on(
    store: MooncakeStore,
    host: torch.Tensor,
    *,
    namespace: str | None = None,
    identity: BlockIdentity | None = None,
    lookup_timeout: float = 10.0,
    io_threads: int = 2,
    start_degraded: bool = False,
    master: str | None = None,
    metadata_server: str | None = None,
    integrity_key: bytes | None = None,
    options: RemoteTierOptions = EVENTS_ON,
    timeout: float = 1.0,
) -> MooncakeTier:
    """A tier on ``store`` (or the given addresses) over ``host`` that lends the store no memory, of the example identity unless told."""
    return MooncakeTier(
        host,
        identity=identity if identity is not None else example_identity(int(host.shape[1])),
        client=replace(
            store.client(timeout),
            master=master if master is not None else store.master,
            metadata_server=metadata_server if metadata_server is not None else store.metadata_server,
        ),
        integrity_key=integrity_key,
        options=replace(
            options,
            namespace=namespace,
            lookup_timeout=lookup_timeout,
            io_threads=io_threads,
            retry_interval=0.05,
            start_degraded=start_degraded,
        ),
    )


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

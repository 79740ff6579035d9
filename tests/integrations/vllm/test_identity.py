"""Under vLLM the block identity comes from vLLM's own config: engines of other models or ranks never share blocks."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from vllm.v1.kv_offload.base import LookupResult, OffloadingSpec, OffloadKey, ReqContext
from vllm.v1.kv_offload.config import OffloadingConfig, OffloadingModelConfig
from vllm.v1.kv_offload.factory import OffloadingSpecFactory
from vllm.v1.kv_offload.tiering.base import SecondaryTierManager
from vllm.v1.kv_offload.tiering.factory import SecondaryTierFactory

from kvcontract.config import ConfigError
from kvcontract.integrations.vllm import KVContractOffloadingSpec, KVContractSecondaryTier
from tests.integrations.support import save_model
from tests.integrations.vllm.support import SPEC_PATH, offloading_config
from tests.integrations.vllm.test_secondary_tier import CHUNK_BYTES, CHUNKS, finished, job, keys
from tests.tiers.redis.support import lru_server_or_skip

create_secondary_tier: Callable[[dict[str, object], memoryview, OffloadingSpec], SecondaryTierManager] = getattr(
    SecondaryTierFactory, "create_secondary_tier"
)


def engine(
    *, model: str = "tiny-llama", dtype: str = "float16", rank: int = 0, world_size: int = 1
) -> OffloadingConfig:
    """vLLM's offloading config of one engine (worker ``rank`` of ``world_size`` tensor-parallel workers)."""
    config = offloading_config({**SPEC_PATH, "cpu_bytes_to_use": CHUNKS * CHUNK_BYTES})
    parallel = dataclasses.replace(config.parallel, rank=rank, world_size=world_size, tp_size=world_size)
    return dataclasses.replace(config, model=OffloadingModelConfig(name=model, dtype=dtype), parallel=parallel)


def spec_of(config: OffloadingConfig) -> KVContractOffloadingSpec:
    spec = OffloadingSpecFactory.create_spec(config)
    assert isinstance(spec, KVContractOffloadingSpec)
    return spec


def test_the_spec_derives_the_identity_from_vllm_s_config() -> None:
    identity = spec_of(engine()).identity
    assert (identity.model, identity.dtype, identity.num_layers, identity.tp_size) == ("tiny-llama", "float16", 2, 1)
    assert dict(identity.layout_details)["engine"] == "vllm"
    assert spec_of(engine()).identity.fingerprint == identity.fingerprint, "engines of one model share by construction"


Engines = tuple[Callable[[], OffloadingConfig], Callable[[], OffloadingConfig]]
OTHER_ENGINES: dict[str, Engines] = {
    "model": (engine, lambda: engine(model="another-llama")),
    "dtype": (engine, lambda: engine(dtype="bfloat16")),
    "tp-rank": (lambda: engine(world_size=2), lambda: engine(rank=1, world_size=2)),
    "tp-size": (engine, lambda: engine(world_size=2)),
}
"""Pairs of engines whose blocks must never mix."""


@pytest.mark.parametrize("pair", sorted(OTHER_ENGINES))
def test_another_model_dtype_or_rank_is_another_identity(pair: str) -> None:
    first, second = OTHER_ENGINES[pair]
    assert spec_of(first()).identity.fingerprint != spec_of(second()).identity.fingerprint


def test_other_weights_at_the_model_s_path_are_another_identity(tmp_path: Path) -> None:
    path = str(save_model(tmp_path / "model", seed=1))
    before = spec_of(engine(model=path)).identity
    assert before.revision.startswith("files:")
    save_model(tmp_path / "model", seed=2)
    assert spec_of(engine(model=path)).identity.fingerprint != before.fingerprint


def test_a_revision_in_the_kvcontract_config_replaces_what_the_directory_says(tmp_path: Path) -> None:
    path = str(save_model(tmp_path / "model", seed=1))
    config = dataclasses.replace(
        engine(model=path), extra_config={**SPEC_PATH, "kvcontract": {"identity": {"revision": "ft-2026-12"}}}
    )
    assert spec_of(config).identity.revision == "ft-2026-12"


def test_identity_fields_vllm_decides_are_refused_in_the_kvcontract_config() -> None:
    config = offloading_config({**SPEC_PATH, "kvcontract": {"identity": {"model": "mine", "namespace": "team-a"}}})
    with pytest.raises(ConfigError, match="kvcontract.identity.model: vLLM's config sets it"):
        OffloadingSpecFactory.create_spec(config)
    named = offloading_config({**SPEC_PATH, "kvcontract": {"identity": {"namespace": "team-a"}}})
    assert spec_of(named).identity.namespace == "team-a"


def tier_of(config: OffloadingConfig, primary: np.ndarray, tier: dict[str, object]) -> KVContractSecondaryTier:
    spec = OffloadingSpecFactory.create_spec(
        dataclasses.replace(config, extra_config={"cpu_bytes_to_use": CHUNKS * CHUNK_BYTES})
    )
    adapter = create_secondary_tier(
        {
            "type": "KVContractSecondaryTier",
            "module_path": "kvcontract.integrations.vllm",
            "tier": tier,
        },
        primary.data,
        spec,
    )
    assert isinstance(adapter, KVContractSecondaryTier)
    return adapter


def _settled(tier: KVContractSecondaryTier, keys_: list[OffloadKey]) -> list[LookupResult]:
    """Lookups asked again while a remote tier answers RETRY (its EXISTS batch in flight)."""
    answers: list[LookupResult] = []
    for k in keys_:
        answer = tier.lookup(k, ReqContext("r"))
        for _ in range(10_000):
            if answer is not LookupResult.RETRY:
                break
            time.sleep(0.001)
            answer = tier.lookup(k, ReqContext("r"))
        answers.append(answer)
    return answers


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = lru_server_or_skip(tmp_path_factory.mktemp("redis"))
    yield server.url
    server.stop()


@pytest.mark.parametrize("kind", ["file", "redis"])
@pytest.mark.parametrize("pair", ["model", "tp-rank"])
def test_two_vllm_engines_on_one_storage_share_nothing_and_each_restart_reuses_its_own(
    tmp_path: Path, request: pytest.FixtureRequest, pair: str, kind: str
) -> None:
    tier: dict[str, object] = (
        {"kind": "file", "path": str(tmp_path / "shared"), "capacity": CHUNKS}
        if kind == "file"
        else {
            "kind": "redis",
            "url": request.getfixturevalue("redis_url"),
            "namespace": f"identity-{pair}",
            "io_threads": 2,
        }
    )
    first_engine, second_engine = OTHER_ENGINES[pair]
    first_config, second_config = first_engine(), second_engine()
    primary = np.random.default_rng(0).integers(0, 256, (CHUNKS, CHUNK_BYTES), dtype=np.uint8)
    first = tier_of(first_config, primary, tier)
    first.submit_store(job(1, keys(1, 2), [0, 1]))
    assert finished(first, 1).success
    first.shutdown()
    second = tier_of(second_config, np.zeros_like(primary), tier)
    try:
        assert _settled(second, keys(1, 2)) == [LookupResult.MISS] * 2
    finally:
        second.shutdown()
    restarted_primary = np.zeros_like(primary)
    restarted = tier_of(first_config, restarted_primary, tier)
    try:
        assert _settled(restarted, keys(1, 2)) == [LookupResult.HIT] * 2
        restarted.submit_load(job(2, keys(1, 2), [3, 4]))
        assert finished(restarted, 2).success
        assert np.array_equal(restarted_primary[3:5], primary[0:2])
    finally:
        restarted.shutdown()

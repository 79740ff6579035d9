"""The tiers a config names, built through a registry, as policies are: a ``kind`` names a builder.

The built-in kinds (``file``, ``redis``, ``mooncake``) each have a builder here that reads its
own config model; any other kind is a tier of another package
(:class:`~kvcontract.config.tiers.ExternalTierConfig`), found by module path or entry point
(:mod:`kvcontract.tiers.registry`) and built with the options its config gives. A new kind
adds a builder to :data:`TIER_BUILDERS`, never a branch to the code that calls them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar

import torch
from pydantic import BaseModel

from kvcontract.config import ConfigError, KVContractConfig
from kvcontract.config.tiers import ExternalTierConfig, FileTierConfig, MooncakeTierConfig, RedisTierConfig, TierConfig
from kvcontract.contracts.identity import BlockIdentity
from kvcontract.contracts.tier import SecondaryTier
from kvcontract.tiers import FileTier, MooncakeTier, RedisTier
from kvcontract.tiers.integrity import read_integrity_key, read_secret_file
from kvcontract.tiers.redis.client import RedisAccess
from kvcontract.tiers.registry import find_tier

__all__ = ["TIER_BUILDERS", "TierBuilder", "TierSite", "build_tier"]

_C = TypeVar("_C", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class TierSite:
    """Where a tier is built: the host blocks its jobs' host block ids index, and the identity of its blocks."""

    host_blocks: torch.Tensor
    identity: BlockIdentity


TierBuilder = Callable[[TierConfig, TierSite], SecondaryTier]
"""Builds the tier a tier config describes, at a site."""


def build_tier(
    tier: TierConfig,
    config: KVContractConfig,
    host_blocks: torch.Tensor,
    *,
    identity: BlockIdentity | None = None,
) -> SecondaryTier:
    """The secondary tier ``tier`` describes, moving blocks of ``identity`` (by default
    ``config.block_identity()``) in and out of ``host_blocks``."""
    site = TierSite(host_blocks, identity if identity is not None else config.block_identity())
    builder = TIER_BUILDERS.get(tier.kind, _build_external)
    return builder(tier, site)


def _for(model: type[_C], build: Callable[[_C, TierSite], SecondaryTier]) -> TierBuilder:
    """``build`` as a registry entry: the registry files it under the kind of ``model``, whose configs alone it is given."""

    def builder(tier: TierConfig, site: TierSite) -> SecondaryTier:
        if not isinstance(tier, model):
            raise TypeError(f"the builder of {model.__name__} was given a {type(tier).__name__}")
        return build(tier, site)

    return builder


def _integrity_key(path: Path | None) -> bytes | None:
    """The integrity key in ``path`` (its owner and mode checked), or ``None`` when the config names no key file."""
    return None if path is None else read_integrity_key(path)


def _build_file(tier: FileTierConfig, site: TierSite) -> FileTier:
    return FileTier(
        tier.path,
        tier.capacity,
        site.host_blocks,
        identity=site.identity,
        policy=tier.policy.kind,
        io_threads=tier.io_threads,
        umask=tier.umask,
        trust_shared_root=tier.trust_shared_root,
        enable_events=tier.enable_events,
        integrity_key=_integrity_key(tier.integrity_key_file),
    )


def _redis_access(tier: RedisTierConfig) -> RedisAccess:
    """The ACL login and TLS of ``tier``, its password read from ``password_file`` (owner and mode checked)."""
    password = None
    if tier.password_file is not None:
        password = read_secret_file(tier.password_file, "password_file").decode().rstrip("\r\n")
    return RedisAccess(
        username=tier.username,
        password=password,
        tls=tier.tls,
        tls_ca_file=tier.tls_ca_file,
        tls_cert_file=tier.tls_cert_file,
        tls_key_file=tier.tls_key_file,
        tls_check_hostname=tier.tls_check_hostname,
    )


def _build_redis(tier: RedisTierConfig, site: TierSite) -> RedisTier:
    nodes = [(host, int(port)) for host, _, port in (node.rpartition(":") for node in tier.cluster_nodes)]
    return RedisTier(
        site.host_blocks,
        identity=site.identity,
        url=tier.url,
        cluster_nodes=nodes,
        socket_timeout=tier.socket_timeout,
        connect_timeout=tier.connect_timeout,
        pool_size=tier.pool_size,
        ttl_seconds=tier.ttl_seconds,
        integrity_key=_integrity_key(tier.integrity_key_file),
        access=_redis_access(tier),
        options=tier.options(),
    )


def _build_mooncake(tier: MooncakeTierConfig, site: TierSite) -> MooncakeTier:
    return MooncakeTier(
        site.host_blocks,
        identity=site.identity,
        master=tier.master,
        metadata_server=tier.metadata_server,
        protocol=tier.protocol,
        devices=tier.devices,
        local_hostname=tier.local_hostname,
        global_segment_size=tier.global_segment_size,
        local_buffer_size=tier.local_buffer_size,
        replicas=tier.replicas,
        timeout=tier.timeout,
        client_log_level=tier.client_log_level,
        integrity_key=_integrity_key(tier.integrity_key_file),
        options=tier.options(),
    )


def _build_external_tier(tier: ExternalTierConfig, site: TierSite) -> SecondaryTier:
    """``Class(host_blocks, identity=identity, **options)`` of the class ``tier.kind`` names; what it refuses, a config error."""
    cls = find_tier(tier.kind)
    try:
        return cls(site.host_blocks, identity=site.identity, **tier.options)
    except (TypeError, ValueError) as error:
        raise ConfigError(
            "config", [f"manager.secondary: tier {tier.kind!r} refused its options {tier.options}: {error}"]
        ) from error


_build_external = _for(ExternalTierConfig, _build_external_tier)

TIER_BUILDERS: Mapping[str, TierBuilder] = MappingProxyType(
    {
        "file": _for(FileTierConfig, _build_file),
        "redis": _for(RedisTierConfig, _build_redis),
        "mooncake": _for(MooncakeTierConfig, _build_mooncake),
    }
)
"""The builder of each built-in kind; a kind not here is a tier of another package."""

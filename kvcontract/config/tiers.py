"""The secondary tiers a tiering manager keeps: file, Redis, Mooncake, and tiers of other packages by module path or entry point."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, Self, cast

from pydantic import (
    ByteSize,
    Discriminator,
    Field,
    JsonValue,
    Tag,
    field_validator,
    model_validator,
)

from kvcontract.config.base import ConfigModel
from kvcontract.config.limits import ConfigLimits
from kvcontract.config.policy import PolicyConfig
from kvcontract.config.sizes import Capacity

if TYPE_CHECKING:
    from kvcontract.tiers.mooncake.client import MooncakeClientOptions
    from kvcontract.tiers.redis.client import RedisAccess
    from kvcontract.tiers.remote_tier import RemoteTierOptions

_KEY_FILE = (
    "A file of 32 or more secret bytes (chmod 600, this user's) that the engines sharing the tier hold: every "
    "value carries a keyed MAC, and a value without it, or with another key, is a miss."
)
_JOB_DEADLINE = (
    "Seconds after which a job the store has not finished is reported failed (a load's host blocks zero-filled), "
    "counted in expired_jobs; null: no deadline. Mooncake loads run to their call's timeout instead."
)
_KNOWN_KEYS = "Keys known present that the tier remembers (least recently used forgotten, then asked again)."
_EVENTS = "Keep OffloadingEvents for take_events; off (the default), the tier keeps none."
_PASSWORD_FILE = (
    "A file holding the Redis ACL user's password (chmod 600, this user's); its trailing newline is dropped."
)


BUILT_IN_KINDS = ("file", "redis", "mooncake")
"""The kinds with a config model of their own here; any other ``kind`` names an :class:`ExternalTierConfig`'s tier."""


class FileTierConfig(ConfigModel):
    """Blocks as files under ``path``, with their own capacity and eviction policy.

    ``umask`` sets the modes of what the tier creates (``0o077``: files 0600, directories
    0700; ``0o007`` shares them with a group); octal strings such as ``"007"`` are read as
    octal. ``path`` must belong to this user and be writable by no one the umask leaves
    out, unless ``trust_shared_root`` says everyone who can write it is trusted (docs/file-tier.md).
    """

    kind: Literal["file"] = "file"
    path: Path
    capacity: Capacity
    policy: PolicyConfig = PolicyConfig()
    io_threads: int = Field(default=4, ge=1, le=ConfigLimits.MAX_IO_THREADS)
    umask: int = Field(default=0o077, ge=0, le=0o077, description="Permission bits the tier never grants.")
    trust_shared_root: bool = False
    enable_events: bool = False
    integrity_key_file: Path | None = Field(default=None, description=_KEY_FILE)

    @field_validator("path", mode="before")
    @classmethod
    def _nonempty_path(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            raise ValueError(
                "path is empty: name the directory the tier keeps its blocks in (an empty path is the working directory)"
            )
        return value

    @field_validator("umask", mode="before")
    @classmethod
    def _octal_string(cls, value: object) -> object:
        if isinstance(value, str) and value.strip():
            digits = value.strip().lower().removeprefix("0o")
            if not digits or digits.strip("01234567"):
                raise ValueError(f'umask {value!r} is not octal: write it like 0o077 or "077"')
            return int(digits, 8)
        return value


class RemoteTierConfig(ConfigModel):
    """What every tier on a remote store takes (Redis, Mooncake): one :class:`~kvcontract.tiers.remote_tier.RemoteTierOptions` for the tier.

    ``start_degraded`` starts the tier even when the store does not answer, retrying every
    ``retry_interval`` seconds; ``lookup_timeout`` is how long a key not known is answered
    ``RETRY`` before ``MISS``. Timeouts are seconds.
    """

    namespace: str | None = Field(default=None, min_length=1, max_length=64, pattern=r"^[^{}:\s]+$")
    io_threads: int = Field(default=4, ge=1, le=ConfigLimits.MAX_IO_THREADS)
    lookup_timeout: float = Field(default=0.1, gt=0)
    start_degraded: bool = False
    retry_interval: float = Field(default=1.0, gt=0)
    integrity_key_file: Path | None = Field(default=None, description=_KEY_FILE)
    job_deadline: float | None = Field(default=10.0, gt=0, description=_JOB_DEADLINE)
    known_keys: int = Field(default=1 << 16, ge=1, le=ConfigLimits.MAX_TRACKER_SIZE, description=_KNOWN_KEYS)
    enable_events: bool = Field(default=False, description=_EVENTS)

    def options(self) -> RemoteTierOptions:
        """The options of the tier this config describes, as one value its constructor takes whole
        (every field named like one of :class:`~kvcontract.tiers.remote_tier.RemoteTierOptions`)."""
        from kvcontract.tiers.remote_tier import RemoteTierOptions

        return self.as_value(RemoteTierOptions)


class RedisTierConfig(RemoteTierConfig):
    """Blocks as values on a Redis server or Redis Cluster that many engines share; Redis owns capacity.

    Give ``url`` or ``cluster_nodes`` (``host:port``). Timeouts are seconds. Key names
    derive from the block identity; ``namespace`` (optional) is added to them, scoping keys
    further within one identity, never across identities. ``rediss://`` (or ``tls: true`` for
    a cluster) connects over TLS, checked against ``tls_ca_file``; ``tls_cert_file`` and
    ``tls_key_file`` present a client certificate; ``username`` and ``password_file`` log in
    as an ACL user. ``integrity_key_file`` seals every value with a keyed MAC (docs/redis.md, Trust).
    """

    kind: Literal["redis"] = "redis"
    url: str | None = Field(default=None, pattern=r"^(redis|rediss|unix)://")
    cluster_nodes: list[Annotated[str, Field(pattern=r"^[^:\s]+:\d{1,5}$")]] = Field(default_factory=list[str])
    namespace: str | None = Field(default=None, min_length=1, max_length=64, pattern=r"^[^{}\s]+$")
    socket_timeout: float = Field(default=1.0, gt=0)
    connect_timeout: float = Field(default=1.0, gt=0)
    pool_size: int = Field(default=8, ge=2)
    ttl_seconds: int | None = Field(default=None, ge=1)
    username: str | None = Field(default=None, min_length=1, max_length=256, pattern=r"^\S+$")
    password_file: Path | None = Field(default=None, description=_PASSWORD_FILE)
    tls: bool = Field(default=False, description="TLS to the cluster's nodes; a url says it with rediss://.")
    tls_ca_file: Path | None = None
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_check_hostname: bool = True

    @model_validator(mode="after")
    def _one_address(self) -> Self:
        if (self.url is None) == (not self.cluster_nodes):
            raise ValueError("give exactly one of url (redis://host:port/db) and cluster_nodes ([host:port, ...])")
        from kvcontract.tiers.redis.client import check_pool_size  # the tier's own check (imports torch)

        check_pool_size(self.pool_size, self.io_threads)
        if self.url is not None and self.tls:
            raise ValueError("tls: a url says TLS by its scheme: write rediss://host:port/db and drop tls")
        uses_tls = self.tls or (self.url is not None and self.url.startswith("rediss://"))
        if not uses_tls and (self.tls_ca_file or self.tls_cert_file or self.tls_key_file):
            raise ValueError(
                "tls_ca_file, tls_cert_file and tls_key_file need TLS: write rediss:// (or tls: true for a cluster)"
            )
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("tls_cert_file and tls_key_file go together: give both or neither")
        return self

    def access(self, password: str | None) -> RedisAccess:
        """The ACL login and TLS of the tier, as one value its constructor takes whole (the fields of
        :class:`~kvcontract.tiers.redis.client.RedisAccess` by their names), with ``password`` as read from ``password_file``."""
        from kvcontract.tiers.redis.client import RedisAccess

        return self.as_value(RedisAccess, password=password)


class MooncakeTierConfig(RemoteTierConfig):
    """Blocks as objects in a Mooncake Store that many engines share; Mooncake owns capacity and eviction.

    ``master`` is ``host:port`` of ``mooncake_master``; ``metadata_server`` its HTTP metadata
    server (or ``P2PHANDSHAKE``). Each engine lends ``global_segment_size`` bytes of its memory
    to the store (0: none, it only uses the others'); ``local_hostname`` is the address other
    clients reach this one at. Sizes are bytes or strings such as ``"1GiB"``; timeouts are
    seconds. Key names derive from the block identity; ``namespace`` scopes them further.
    """

    kind: Literal["mooncake"] = "mooncake"
    master: str = Field(default="127.0.0.1:50051", pattern=r"^[^:\s]+:\d{1,5}$")
    metadata_server: str = Field(default="http://127.0.0.1:8080/metadata", pattern=r"^(https?://\S+|P2PHANDSHAKE)$")
    protocol: Literal["tcp", "rdma"] = "tcp"
    devices: str = Field(default="", description="RDMA devices (e.g. mlx5_0,mlx5_1); empty over TCP.")
    local_hostname: str = Field(default="127.0.0.1", min_length=1, pattern=r"^\S+$")
    global_segment_size: ByteSize = Field(default=ByteSize(1 << 30), ge=0, le=ConfigLimits.MAX_TIER_BYTES)
    local_buffer_size: ByteSize = Field(default=ByteSize(256 << 20), ge=0, le=ConfigLimits.MAX_TIER_BYTES)
    replicas: int = Field(default=1, ge=1, le=16)
    timeout: float = Field(default=5.0, gt=0)
    client_log_level: Literal["INFO", "WARNING", "ERROR"] = Field(
        default="WARNING", description="The least level of the Mooncake client's own log lines (MC_LOG_LEVEL)."
    )

    def client(self) -> MooncakeClientOptions:
        """What Mooncake's client is set up with, as one value the tier takes whole (every field of
        :class:`~kvcontract.tiers.mooncake.client.MooncakeClientOptions`, by its name)."""
        from kvcontract.tiers.mooncake.client import MooncakeClientOptions

        return self.as_value(MooncakeClientOptions)


class ExternalTierConfig(ConfigModel):
    """A tier another package provides: ``kind`` is ``"package.module:Class"`` or the name of an entry point of ``kvcontract.tiers``.

    The class must inherit ``SecondaryTier``; it is built as ``Class(host_blocks,
    identity=identity, **options)``. ``options`` are checked against its constructor's
    parameters when the config is loaded, and their values by the constructor when it is built.
    """

    kind: str = Field(min_length=1)
    options: dict[str, JsonValue] = Field(default_factory=dict[str, JsonValue])

    @field_validator("kind")
    @classmethod
    def _known_tier(cls, kind: str) -> str:
        from kvcontract.tiers.registry import find_tier

        try:
            find_tier(kind)
        except ValueError as error:
            built_in = "" if ":" in kind else f" (the built-in kinds are {', '.join(BUILT_IN_KINDS)})"
            raise ValueError(f"{error}{built_in}") from None
        return kind

    @model_validator(mode="after")
    def _options_fit(self) -> Self:
        from kvcontract.tiers.registry import find_tier

        tier = find_tier(self.kind)
        signature = inspect.signature(tier)
        try:
            signature.bind(None, identity=None, **self.options)
        except TypeError as error:
            taken = [name for name in list(signature.parameters)[1:] if name != "identity"]
            raise ValueError(
                f"options: {self.kind} does not take them ({error}); its constructor takes "
                f"{', '.join(taken) or 'no options'} besides host_blocks and identity"
            ) from None
        return self


def _tier_tag(data: object) -> str:
    """The union member a tier's config is read as: its own model for a built-in kind, else the external one."""
    kind: object = (
        cast("dict[str, object]", data).get("kind") if isinstance(data, dict) else getattr(data, "kind", None)
    )
    return kind if isinstance(kind, str) and kind in BUILT_IN_KINDS else "external"


TierConfig = Annotated[
    Annotated[FileTierConfig, Tag("file")]
    | Annotated[RedisTierConfig, Tag("redis")]
    | Annotated[MooncakeTierConfig, Tag("mooncake")]
    | Annotated[ExternalTierConfig, Tag("external")],
    Discriminator(_tier_tag),
]
"""A tier's config: ``kind`` picks the model."""

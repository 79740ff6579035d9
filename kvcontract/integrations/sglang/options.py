"""The backend's keys in SGLang's ``--hicache-storage-backend-extra-config``, checked once at start.

SGLang hands the whole extra config to the backend: its own keys (``backend_name``,
``module_path``, ``class_name``, ``interface_v1``, ``allocator``) beside kvcontract's. kvcontract's are
``kvcontract`` (a mapping: ``tier``, a kvcontract tier config, and optionally ``identity``,
``timeout_seconds`` and ``staging_pages``) or ``config_file`` (a YAML or JSON file
holding that mapping). Any other key is refused, naming it, so a typo never passes silently.
A tier's ``capacity`` is a size (``"200GiB"``) or a number of pages; the tier counts blocks
(a page is one block, or two on the zero-copy path of a K/V pool), so either becomes blocks here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import yaml
from pydantic import ByteSize, TypeAdapter, ValidationError

from kvcontract.config import (
    ConfigError,
    KVContractConfig,
    TieringManagerConfig,
    load_config,
)
from kvcontract.config.tiers import TierConfig

__all__ = ["DEFAULT_POOL_STAGING_PAGES", "DEFAULT_STAGING_PAGES", "BackendOptions", "backend_options", "check_keys"]

SOURCE = "hicache-storage-backend-extra-config"
_SGLANG_KEYS = frozenset({"backend_name", "module_path", "class_name", "interface_v1", "allocator"})
"""SGLang's keys that stay in the extra config it hands the backend (``allocator`` picks its host allocator;
``prefetch_*``, ``hicache_storage_pass_prefix_keys`` and ``tp_lcm_size`` it takes out before)."""
_OWN_KEYS = frozenset({"kvcontract", "config_file"})
MAX_STAGING_PAGES = 65_536
"""The most staging pages a backend reserves: far more than a call moves (SGLang's are 128 pages); 10**12 was a traceback."""
_SECTION_KEYS = frozenset({"tier", "identity", "timeout_seconds", "staging_pages", "zero_copy"})
_SIZE = TypeAdapter(ByteSize)
DEFAULT_TIMEOUT_SECONDS = 10.0
DEFAULT_STAGING_PAGES = 256
"""Two of SGLang's largest calls (128 pages each, prefetch and backup at once) on the copying layouts' own staging memory."""
DEFAULT_POOL_STAGING_PAGES = 16
"""On zero-copy layouts the staging pages are SGLang's host pool's, reserved at start for a slow tier: a few, used in rounds."""


@dataclass(frozen=True, slots=True)
class BackendOptions:
    """What the extra config asks of the backend: the kvcontract config of its one tier, the wait bound, the staging room."""

    config: KVContractConfig
    timeout_seconds: float
    staging_pages: int | None
    """``None``: the default of the path (:data:`DEFAULT_STAGING_PAGES` or :data:`DEFAULT_POOL_STAGING_PAGES`)."""
    zero_copy: bool = True
    """``False``: page-first layouts take the copying path too, so every call keeps ``timeout_seconds``
    even on a tier with no bound of its own on a job (a zero-copy job late at the timeout is waited out)."""

    @property
    def tier(self) -> TierConfig:
        """The tier config that serves as SGLang's storage."""
        manager = self.config.manager
        assert isinstance(manager, TieringManagerConfig)  # backend_options builds a tiering manager
        return manager.secondary[0]


def check_keys(extra_config: Mapping[str, object] | None) -> dict[str, object]:
    """The ``kvcontract`` section of SGLang's extra config (read from ``config_file`` if given), after refusing every unknown key."""
    extra = dict(extra_config or {})
    unknown = sorted(key for key in extra if key not in _SGLANG_KEYS | _OWN_KEYS)
    if unknown:
        raise ConfigError(
            SOURCE, [f"{key}: unknown key; known: {', '.join(sorted(_SGLANG_KEYS | _OWN_KEYS))}" for key in unknown]
        )
    if ("kvcontract" in extra) == ("config_file" in extra):
        raise ConfigError(
            SOURCE,
            [
                'give either "kvcontract" (a mapping with "tier") or "config_file" (a file holding it), not both or neither'
            ],
        )
    section = extra["kvcontract"] if "kvcontract" in extra else _read(str(extra["config_file"]))
    if not isinstance(section, Mapping):
        raise ConfigError(
            SOURCE, ['kvcontract: give a mapping, e.g. {"tier": {"kind": "file", "path": ..., "capacity": "100GiB"}}']
        )
    fields = {str(key): value for key, value in cast("Mapping[object, object]", section).items()}  # checked: a mapping
    bad = sorted(key for key in fields if key not in _SECTION_KEYS)
    if bad:
        raise ConfigError(
            SOURCE, [f"kvcontract.{key}: unknown key; known: {', '.join(sorted(_SECTION_KEYS))}" for key in bad]
        )
    return fields


def backend_options(
    extra_config: Mapping[str, object] | None, block_bytes: int, blocks_per_page: int
) -> BackendOptions:
    """The options in SGLang's extra config, the tier's capacity in blocks of ``block_bytes``; one ``ConfigError`` naming every bad key."""
    fields = check_keys(extra_config)
    timeout = fields.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS)
    staging = fields.get("staging_pages")
    zero_copy = fields.get("zero_copy", True)
    problems: list[str] = []
    if not isinstance(zero_copy, bool):
        problems.append(f"kvcontract.zero_copy: give true or false, got {zero_copy!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        problems.append(f"kvcontract.timeout_seconds: give a number of seconds above 0, got {timeout!r}")
    if staging is not None and (
        isinstance(staging, bool) or not isinstance(staging, int) or not 1 <= staging <= MAX_STAGING_PAGES
    ):
        problems.append(
            f"kvcontract.staging_pages: give a whole number of pages from 1 to {MAX_STAGING_PAGES}, got {staging!r}"
        )
    if problems:
        raise ConfigError(SOURCE, problems)
    assert isinstance(timeout, (int, float)) and (staging is None or isinstance(staging, int))  # checked above
    assert isinstance(zero_copy, bool)  # checked above
    tier = _tier_config(fields.get("tier"), fields.get("identity"), block_bytes, blocks_per_page)
    return BackendOptions(tier, float(timeout), staging, zero_copy)


def _read(path: str) -> object:
    """The mapping in the file ``path``, YAML or JSON (JSON is YAML)."""
    try:
        return yaml.safe_load(Path(path).read_bytes())
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(SOURCE, [f"config_file: cannot read {path}: {error}"]) from None


def _tier_config(tier: object, identity: object, block_bytes: int, blocks_per_page: int) -> KVContractConfig:
    """A kvcontract config whose one secondary tier is ``tier``, its capacity in blocks."""
    if not isinstance(tier, Mapping):
        raise ConfigError(
            SOURCE,
            [
                'kvcontract.tier: give a kvcontract tier config, e.g. {"kind": "file", "path": ..., "capacity": "100GiB"}'
            ],
        )
    fields = {str(key): value for key, value in cast("Mapping[object, object]", tier).items()}  # checked: a mapping
    capacity = fields.get("capacity")
    if isinstance(capacity, str):
        try:
            blocks = int(_SIZE.validate_python(capacity)) // (block_bytes * blocks_per_page) * blocks_per_page
        except ValidationError:
            raise ConfigError(
                SOURCE, [f"kvcontract.tier.capacity: {capacity!r} is not a size such as '100GiB' or a page count"]
            ) from None
        if blocks < 1:
            raise ConfigError(
                SOURCE,
                [f"kvcontract.tier.capacity: {capacity!r} holds no page of {block_bytes * blocks_per_page} bytes"],
            )
        fields["capacity"] = blocks
    elif isinstance(capacity, int) and not isinstance(capacity, bool):
        if capacity < 1:  # checked here, in pages: scaled to blocks first, -5 pages was reported as "-10"
            raise ConfigError(SOURCE, [f"kvcontract.tier.capacity: give at least 1 page, got {capacity}"])
        fields["capacity"] = capacity * blocks_per_page
    base: dict[str, object] = {"manager": {"kind": "tiering", "secondary": [fields]}}
    if identity is not None:
        base["identity"] = identity
    try:
        return load_config(base=base)
    except ConfigError as error:
        raise ConfigError(
            SOURCE, [f"kvcontract.{problem.replace('manager.secondary.0.', 'tier.')}" for problem in error.problems]
        ) from None

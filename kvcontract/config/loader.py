"""Loading a config: files (YAML, TOML, JSON) read as untrusted, bounded, then validated once."""

from __future__ import annotations

import codecs
import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import cast

import yaml
from pydantic import (
    ValidationError,
)

from kvcontract.config.environment import apply_environment, override_fields
from kvcontract.config.errors import ConfigError, describe_errors, parse_failure
from kvcontract.config.limits import ConfigLimits, check_shape
from kvcontract.config.model import KVContractConfig


def config_json_schema() -> dict[str, object]:
    """The JSON schema of :class:`KVContractConfig`."""
    return KVContractConfig.model_json_schema()


def load_config(
    path: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    base: Mapping[str, object] | None = None,
) -> KVContractConfig:
    """Read ``path`` (YAML, TOML or JSON), or take ``base`` (or the defaults) without one,
    then apply ``KVCONTRACT_`` environment overrides.

    Raises :class:`ConfigError` naming the file and every bad field.
    """
    source = str(path) if path is not None else "defaults"
    data = _read(Path(path)) if path is not None else dict(base or {})
    check_shape(data, source)
    variables = os.environ if environ is None else environ
    data = apply_environment(data, variables)
    check_shape(data, source)
    try:
        return KVContractConfig.model_validate(data)
    except ValidationError as error:
        raise ConfigError(source, describe_errors(error, KVContractConfig, override_fields(variables))) from None


def read_config(path: str | Path) -> dict[str, object]:
    """A config file's sections as written, not yet validated: for a caller that fits them to an
    engine before :func:`load_config` (``base=``) checks them, as the vLLM adapter turns sizes into
    vLLM's blocks. Raises :class:`ConfigError` naming the file when it cannot be read or parsed."""
    data = _read(Path(path))
    check_shape(data, str(path))
    return data


def _read(path: Path) -> dict[str, object]:
    source = str(path)
    try:
        with path.open("rb") as file:
            raw = file.read(ConfigLimits.MAX_CONFIG_BYTES + 1)
    except OSError as error:
        raise ConfigError(source, [f"cannot read config: {error.strerror or error}"]) from None
    if len(raw) > ConfigLimits.MAX_CONFIG_BYTES:
        raise ConfigError(source, [f"a config file is at most {ConfigLimits.MAX_CONFIG_BYTES} bytes"])
    text = _decode(raw, source)
    suffix = path.suffix.lower()
    if suffix not in {".yaml", ".yml", ".toml", ".json"}:
        raise ConfigError(source, [f"unknown config format {suffix!r}; use .yaml, .toml or .json"])
    format_name = "YAML" if suffix in {".yaml", ".yml"} else suffix[1:].upper()
    try:
        if format_name == "YAML":
            loaded: object = yaml.safe_load(text)
        elif format_name == "TOML":
            loaded = tomllib.loads(text)
        else:
            loaded = json.loads(text)
    except RecursionError:
        raise ConfigError(
            source,
            [
                f"not valid {format_name}: nested deeper than the parser allows (a config nests at most "
                f"{ConfigLimits.MAX_CONFIG_DEPTH} levels)"
            ],
        ) from None
    except (yaml.YAMLError, ValueError) as error:  # ValueError: JSON/TOML syntax, or an integer too long to read
        raise ConfigError(source, [f"not valid {format_name}: {parse_failure(error)}"]) from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(source, [f"a config is a mapping of sections, got {type(loaded).__name__}"])
    return {str(k): v for k, v in cast("dict[object, object]", loaded).items()}  # parsed YAML/TOML/JSON is untyped


_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _decode(raw: bytes, source: str) -> str:
    """The text of a config file: UTF-8, or UTF-16/32 with a byte-order mark."""
    encoding = next((name for bom, name in _BOMS if raw.startswith(bom)), "utf-8")
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as error:
        raise ConfigError(
            source,
            [
                f"not {encoding.upper().removesuffix('-SIG')} text: byte {error.object[error.start]:#04x} at "
                f"offset {error.start} cannot be decoded; save the file as UTF-8"
            ],
        ) from None

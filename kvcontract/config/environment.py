"""Environment overrides of config fields: ``KVCONTRACT_SECTION__FIELD=value``, read as YAML scalars."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import cast

import yaml

from kvcontract.config.errors import ConfigError, parse_failure
from kvcontract.config.limits import check_shape
from kvcontract.config.model import KVContractConfig

ENV_PREFIX = "KVCONTRACT_"
"""Prefix of environment variables that override config fields (``KVCONTRACT_CHECKS`` excepted)."""

_NOT_FIELDS = frozenset({"CHECKS"})


def _is_override(name: str) -> bool:
    """Whether environment variable ``name`` overrides a field: ``KVCONTRACT_SECTION__FIELD``, or
    ``KVCONTRACT_`` and a top-level field. Other ``KVCONTRACT_`` variables (``KVCONTRACT_CHECKS``,
    test switches) belong to other tools, so a one-word name that is no field is left alone."""
    if not name.startswith(ENV_PREFIX):
        return False
    rest = name[len(ENV_PREFIX) :]
    return "__" in rest or (rest not in _NOT_FIELDS and rest.lower() in KVContractConfig.model_fields)


def override_fields(environ: Mapping[str, str]) -> dict[str, str]:
    """Each field path (``manager.capacity``) that a ``KVCONTRACT_`` variable of ``environ`` sets, and the variable."""
    return {".".join(_path_of(name)): name for name in sorted(environ) if _is_override(name)}


def _path_of(name: str) -> list[str]:
    return [part.lower() for part in name[len(ENV_PREFIX) :].split("__")]


def apply_environment(data: dict[str, object], environ: Mapping[str, str]) -> dict[str, object]:
    """``data`` with each ``KVCONTRACT_SECTION__FIELD`` variable of ``environ`` applied (a copy)."""
    merged = copy.deepcopy(data)
    for name, raw in sorted(environ.items()):
        if not _is_override(name):
            continue
        path = _path_of(name)
        node = merged
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(name, [f"{'.'.join(path[:-1])} is not a section"])
            node = cast("dict[str, object]", child)  # sections of parsed JSON are str-keyed objects
        try:
            value: object = yaml.safe_load(raw)
        except RecursionError:
            raise ConfigError(name, ["not a YAML value: nested deeper than the parser allows"]) from None
        except (yaml.YAMLError, ValueError) as error:  # ValueError: an integer too long to read
            raise ConfigError(name, [f"not a YAML value ({parse_failure(error)}); quote strings"]) from None
        check_shape(value, name)
        node[path[-1]] = value
    return merged

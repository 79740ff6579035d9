"""An eviction policy by name, entry point or import path, checked by type when the config is loaded."""

from __future__ import annotations

import typing

from pydantic import (
    field_validator,
    model_validator,
)

from kvcontract.config.base import ConfigModel


class PolicyConfig(ConfigModel):
    """An eviction policy by registry name (``lru``, ``arc``...) or ``"module:Class"`` path."""

    kind: str = "lru"

    @model_validator(mode="before")
    @classmethod
    def _name_alone(cls, data: object) -> object:
        return {"kind": data} if isinstance(data, str) else data

    @field_validator("kind")
    @classmethod
    def _known_policy(cls, kind: str) -> str:
        from kvcontract.policies import get_policy

        try:
            factory = get_policy(kind)
        except ValueError:
            raise
        except Exception as error:  # a module path runs a plugin's code: any failure is the plugin's
            raise ValueError(f"policy {kind!r}: importing it raised {type(error).__name__}: {error}") from None
        if ":" in kind and not makes_policies(factory):
            raise ValueError(
                f"policy path {kind!r} names {getattr(factory, '__qualname__', repr(factory))}, which is "
                "neither a CachePolicy class nor a function annotated to return a CachePolicy"
            )
        return kind


def makes_policies(factory: object) -> bool:
    """Whether ``factory`` builds policies, judged by type: a ``CachePolicy`` class, or a
    function whose return annotation is one (a path is never called to find out)."""
    from kvcontract.contracts import CachePolicy

    if isinstance(factory, type):
        return CachePolicy in factory.__mro__
    try:
        returned: object = typing.get_type_hints(factory).get("return")
    except Exception:  # unresolvable annotations of a plugin: not a declared CachePolicy factory
        return False
    return isinstance(returned, type) and CachePolicy in returned.__mro__

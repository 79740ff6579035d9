"""Finding a tier that another package provides: an entry point of ``kvcontract.tiers`` or a ``"package.module:Class"`` path.

The built-in kinds (``file``, ``redis``, ``mooncake``) are built by the assembly's registry
(:mod:`kvcontract.assembly.tiers`); a config names any other tier by its ``kind``, which is
found here and checked to be a ``SecondaryTier`` class when the config is loaded, before
anything is built.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import cast

from kvcontract.contracts import SecondaryTier

__all__ = ["ENTRY_POINT_GROUP", "TierClass", "find_tier"]

ENTRY_POINT_GROUP = "kvcontract.tiers"

TierClass = Callable[..., SecondaryTier]
"""A ``SecondaryTier`` class of another package, built as ``Class(host_blocks, identity=identity, **options)``."""


def find_tier(kind: str) -> TierClass:
    """The tier class ``kind`` names, an entry point's name or ``"package.module:Class"``; else ``ValueError`` saying how to name one."""
    if ":" in kind:
        origin = f"tier path {kind!r}"
        try:
            target: object = pkgutil.resolve_name(kind)
        except Exception as error:  # a module path runs a plugin's code: any failure is the plugin's
            raise ValueError(
                f"{origin} does not import ({type(error).__name__}: {error}): write it as "
                "'package.module:Class' of a module on the Python path"
            ) from None
    else:
        entry = next((entry for entry in entry_points(group=ENTRY_POINT_GROUP) if entry.name == kind), None)
        if entry is None:
            raise ValueError(
                f"unknown tier kind {kind!r}: name a tier of another package as 'package.module:Class', "
                f"or publish it in the entry-point group {ENTRY_POINT_GROUP!r}"
            )
        origin = f"entry point {kind!r} ({entry.value})"
        try:
            target = entry.load()
        except Exception as error:  # likewise the plugin's
            raise ValueError(f"{origin} does not load ({type(error).__name__}: {error})") from None
    if not isinstance(target, type) or SecondaryTier not in target.__mro__:
        raise ValueError(
            f"{origin} names {target!r}, which is not a SecondaryTier class: name a class that inherits "
            "kvcontract.contracts.SecondaryTier"
        )
    return cast(TierClass, target)  # checked above: a SecondaryTier class; its options are the config's to check

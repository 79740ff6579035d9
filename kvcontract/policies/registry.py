"""Finding a policy by name: the built-ins, registered names, entry points and ``"module:Class"`` paths.

Third-party packages publish policies in the entry-point group ``kvcontract.policies``
(name = a factory taking the capacity, usually the policy class); a policy that is not
published can be named by its import path, ``"package.module:Class"``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import cast

from kvcontract.contracts import CachePolicy
from kvcontract.policies.arc import ARCPolicy
from kvcontract.policies.lru import LRUPolicy
from kvcontract.policies.prefix_reuse import PrefixReusePolicy
from kvcontract.policies.s3fifo import S3FIFOPolicy
from kvcontract.policies.sieve import SIEVEPolicy

__all__ = [
    "ENTRY_POINT_GROUP",
    "PolicyFactory",
    "available_policies",
    "get_policy",
    "make_policy",
    "register_policy",
]

PolicyFactory = Callable[[int], CachePolicy]
"""Builds a policy from its capacity in blocks."""

ENTRY_POINT_GROUP = "kvcontract.policies"

_registered: dict[str, PolicyFactory] = {}


def register_policy(name: str, factory: PolicyFactory) -> None:
    """Make ``factory`` available as ``name``; registering a name twice with different factories fails."""
    if type(name) is not str or not name.strip() or ":" in name:
        raise ValueError(f"policy name must be a non-empty string without ':' (':' marks a module path), got {name!r}")
    if not callable(factory):
        raise TypeError(f"policy {name!r}: factory must be callable with the capacity, got {factory!r}")
    known = _registered.get(name)
    if known is not None and known is not factory:
        raise ValueError(f"policy {name!r} is already registered as {known!r}; choose another name")
    _registered[name] = factory


def get_policy(name: str) -> PolicyFactory:
    """The factory of policy ``name``: a registered name, an entry point, or ``"module:Class"``."""
    factory = _registered.get(name)
    if factory is not None:
        return factory
    if ":" in name:
        return _load_path(name)
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        if entry.name == name:
            return _checked(entry.load(), f"entry point {name!r} ({entry.value})")
    raise ValueError(
        f"unknown policy {name!r}; known policies: {', '.join(available_policies())}. "
        f"Publish others in the entry-point group {ENTRY_POINT_GROUP!r} "
        "or name them as 'package.module:Class'."
    )


def make_policy(policy: str | CachePolicy, capacity: int) -> CachePolicy:
    """The policy of a pool of ``capacity`` blocks: ``policy`` built by name, or the given instance if empty.

    The one place where the CPU manager and the file tier check a capacity and a policy
    they are given; an instance that already holds blocks would disagree with the pool.
    """
    if type(capacity) is not int or capacity < 1:
        raise ValueError(f"capacity must be a positive number of blocks, got {capacity!r}")
    if isinstance(policy, str):
        return get_policy(policy)(capacity)
    if len(policy):
        raise ValueError(
            f"the policy instance given must be empty, it holds {len(policy)} blocks; "
            "pass a new instance or the policy's name"
        )
    return policy


def available_policies() -> list[str]:
    """Every name ``get_policy`` knows without a module path, sorted."""
    names = set(_registered)
    names.update(entry.name for entry in entry_points(group=ENTRY_POINT_GROUP))
    return sorted(names)


def _load_path(path: str) -> PolicyFactory:
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"policy path {path!r} must look like 'package.module:Class'")
    try:
        target: object = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"policy path {path!r}: cannot import {module_name!r} ({error})") from error
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ValueError(f"policy path {path!r}: {module_name!r} has no {attribute!r}") from None
    return _checked(target, f"policy path {path!r}")


def _checked(target: object, origin: str) -> PolicyFactory:
    """``target`` as a factory, if it is a ``CachePolicy`` subclass or another callable."""
    if isinstance(target, type):
        if CachePolicy not in target.__mro__:
            raise ValueError(f"{origin} names {target.__qualname__}, which does not inherit CachePolicy")
    elif not callable(target):
        raise ValueError(f"{origin} names {target!r}, which is neither a CachePolicy class nor callable")
    return cast(PolicyFactory, target)  # checked above: a CachePolicy class or a callable


register_policy("lru", LRUPolicy)
register_policy("arc", ARCPolicy)
register_policy("s3fifo", S3FIFOPolicy)
register_policy("sieve", SIEVEPolicy)
register_policy("prefix_reuse", PrefixReusePolicy)

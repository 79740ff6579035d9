"""Eviction policies for host-memory block pools, and the registry that names them."""

from kvcontract.policies.arc import ARCPolicy
from kvcontract.policies.base import PolicyBase
from kvcontract.policies.lru import LRUPolicy
from kvcontract.policies.prefix_reuse import PrefixReusePolicy
from kvcontract.policies.registry import (
    ENTRY_POINT_GROUP,
    PolicyFactory,
    available_policies,
    get_policy,
    make_policy,
    register_policy,
)
from kvcontract.policies.s3fifo import S3FIFOPolicy
from kvcontract.policies.sieve import SIEVEPolicy

__all__ = [
    "ENTRY_POINT_GROUP",
    "ARCPolicy",
    "LRUPolicy",
    "PolicyBase",
    "PolicyFactory",
    "PrefixReusePolicy",
    "S3FIFOPolicy",
    "SIEVEPolicy",
    "available_policies",
    "get_policy",
    "make_policy",
    "register_policy",
]

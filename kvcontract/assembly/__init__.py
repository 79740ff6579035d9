"""Assembly: the managers, tiers and worker a validated :class:`~kvcontract.config.KVContractConfig` describes.

A room of its own beside ``config/``, so that the schema imports no component: loading and
validating a config never imports torch's copy engine or the tiers (a tier of another package
named by a config is the one exception: it is imported to check it is a tier).
"""

from kvcontract.assembly.build import apply_runtime_checks, build_manager, build_worker
from kvcontract.assembly.tiers import build_tier

__all__ = ["apply_runtime_checks", "build_manager", "build_tier", "build_worker"]

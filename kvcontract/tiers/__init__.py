"""Secondary tiers: storage below host memory that a tiering manager promotes from and cascades to."""

from kvcontract.tiers.file_tier import FileTier

__all__ = ["FileTier"]

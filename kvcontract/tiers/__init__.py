"""Secondary tiers: storage below host memory that a tiering manager promotes from and cascades to."""

from kvcontract.tiers.file_tier import FileTier, FileTierStats
from kvcontract.tiers.redis_tier import RedisTier, RedisTierStats

__all__ = ["FileTier", "FileTierStats", "RedisTier", "RedisTierStats"]

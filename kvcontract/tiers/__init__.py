"""Secondary tiers: storage below host memory that a tiering manager promotes from and cascades to."""

from kvcontract.tiers.file_tier import FileTier, FileTierStats
from kvcontract.tiers.mooncake_tier import MooncakeTier, MooncakeTierStats
from kvcontract.tiers.redis_tier import RedisTier, RedisTierStats

__all__ = ["FileTier", "FileTierStats", "MooncakeTier", "MooncakeTierStats", "RedisTier", "RedisTierStats"]

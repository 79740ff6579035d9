"""Secondary tiers: storage below host memory that a tiering manager promotes from and cascades to."""

from kvcontract.tiers.file.tier import FileTier, FileTierStats
from kvcontract.tiers.mooncake.tier import MooncakeTier, MooncakeTierStats
from kvcontract.tiers.redis.tier import RedisTier, RedisTierStats

__all__ = ["FileTier", "FileTierStats", "MooncakeTier", "MooncakeTierStats", "RedisTier", "RedisTierStats"]

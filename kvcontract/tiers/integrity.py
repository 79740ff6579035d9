"""What every tier checks on a value it reads back: the payload checksum and the block identity.

One home for both, so the file and Redis formats (and every tier after them) verify alike:
a value that fails either is a miss and an event, never bytes in a host block.
"""

from __future__ import annotations

import logging
import threading

import xxhash

__all__ = ["CorruptBlockError", "IdentityMismatchError", "MismatchLog", "checksum"]


class CorruptBlockError(Exception):
    """A stored block whose type, header, length or checksum does not hold up."""


class IdentityMismatchError(CorruptBlockError):
    """A stored block written under another block identity (another model, layout, rank or namespace)."""


def checksum(payload: memoryview) -> int:
    """The payload checksum: xxh3-64, chosen for speed (about 12 GB/s, against 1.8 for crc32)."""
    return xxhash.xxh3_64_intdigest(payload)


class MismatchLog:
    """Counts a tier's values of another identity and logs the first one, so operators see it once."""

    def __init__(self, logger: logging.Logger, tier: str, fingerprint_hex: str) -> None:
        self._logger = logger
        self._tier = tier
        self._fingerprint = fingerprint_hex
        self._lock = threading.Lock()
        self.count: int = 0

    def record(self, where: str) -> None:
        """One value of another identity met at ``where`` (a key or a file)."""
        with self._lock:
            self.count += 1
            first = self.count == 1
        if first:
            self._logger.warning(
                "%s: %s was written under another block identity than this engine's (%s): read as a miss. "
                "Engines of other models, layouts or ranks share this storage; further mismatches are "
                "counted in kvcontract_identity_mismatches_total",
                self._tier,
                where,
                self._fingerprint,
            )

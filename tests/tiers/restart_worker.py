"""A separate process for the restart tests: stores, or loads and verifies, seeded blocks in a root.

``python -m tests.tiers.restart_worker store|verify ROOT FIRST COUNT`` stores (or loads and
checks) the blocks of keys ``FIRST..FIRST+COUNT-1``, block ``i`` holding ``pattern(i)``.
"""

from __future__ import annotations

import argparse
import sys

import torch

from kvcontract import TierJob
from kvcontract.tiers import FileTier
from tests.tiers.support import BLOCK_BYTES, IDENTITY, drain, key, pattern


def main() -> int:
    """Run one store or verify pass; the exit status says whether it succeeded."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["store", "verify"])
    parser.add_argument("root")
    parser.add_argument("first", type=int)
    parser.add_argument("count", type=int)
    args = parser.parse_args()
    first: int = args.first
    count: int = args.count
    host = torch.zeros((count, BLOCK_BYTES), dtype=torch.uint8)
    tier = FileTier(args.root, capacity=1024, host_blocks=host, identity=IDENTITY)
    keys = [key(i) for i in range(first, first + count)]
    if args.mode == "store":
        for row, i in enumerate(range(first, first + count)):
            host[row].copy_(pattern(i))
        ok = tier.submit_store(TierJob(1, keys, range(count)))
    else:
        ok = tier.submit_load(TierJob(1, keys, range(count)))
    ok = ok and drain(tier, [1])[1].success
    tier.shutdown()
    if args.mode == "verify":
        rows = enumerate(range(first, first + count))
        ok = ok and all(torch.equal(host[row], pattern(i)) for row, i in rows)
    print(f"{args.mode} {count} blocks from {first}: {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

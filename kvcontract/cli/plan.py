"""``kvcontract plan``: the capacity plan of a trace, its report, JSON and plot."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from kvcontract.cli.config_command import load_command_config
from kvcontract.cli.errors import UsageError
from kvcontract.cli.streams import STDOUT, check_distinct, check_writable, writing, wrote

__all__ = ["run_plan"]


def run_plan(options: argparse.Namespace) -> int:
    """``kvcontract plan``: the capacity plan of a trace, printed, and as JSON and a plot when asked."""
    from kvcontract.plan.grid import GridError, parse_capacity_grid
    from kvcontract.plan.planner import plan_capacity, plan_steps
    from kvcontract.plan.report import (
        plan_json,
        print_plan,
        print_tier_plan,
        tier_plan_json,
        write_plan_plot,
    )
    from kvcontract.plan.tier_plan import plan_tiers
    from kvcontract.policies import available_policies
    from kvcontract.sim.output import progress, write_text
    from kvcontract.sim.report import require_plotting
    from kvcontract.sim.trace import read_block_lists

    policies = [name.strip() for name in options.policies.split(",") if name.strip()]
    unknown = sorted(set(policies) - set(available_policies()))
    if not policies or unknown:
        raise UsageError(
            f"--policies: unknown {', '.join(unknown) or 'empty list'}; known: {', '.join(available_policies())}"
        )
    if options.sample is not None and not 0 < options.sample <= 1:
        raise UsageError(f"--sample is a rate in (0, 1], e.g. 0.01 for 1 %; got {options.sample}")
    if options.processes is not None and not 1 <= options.processes <= 256:
        raise UsageError(f"--processes must be between 1 and 256, got {options.processes}")
    if options.target_hit is not None and not 0 < options.target_hit <= 1:
        raise UsageError(f"--target-hit is a hit ratio in (0, 1], got {options.target_hit}")
    json_path = None if options.json in (None, STDOUT) else Path(options.json)
    check_distinct({"--json": json_path, "--plot": options.plot})
    if json_path is not None:
        check_writable(json_path, "--json")
    if options.plot is not None:
        try:
            require_plotting()
        except ImportError as error:
            raise UsageError(f"--plot: {error}") from None
        check_writable(options.plot, "--plot")
    block_bytes = options.block_bytes
    if block_bytes is not None and block_bytes < 1:
        raise UsageError(f"--block-bytes must be at least 1, got {block_bytes}")
    requests: Sequence[Sequence[int]] = read_block_lists(options.trace)
    if options.config is not None:  # a hybrid layout: host blocks of each group's keys
        layout = load_command_config(options.config).kv_layout
        block_bytes, requests = layout.offload_block_bytes, layout.grouped_requests(requests)
    unique = len({hash_id for request in requests for hash_id in request})
    if not unique:
        raise UsageError(f"{options.trace}: the trace has no blocks; give requests with hash ids")
    try:
        grid = parse_capacity_grid(
            options.capacities, unique_blocks=unique, block_bytes=block_bytes, points=options.points
        )
    except GridError as error:
        raise UsageError(f"--capacities: {error}") from None
    tier_sizes = _tier_sizes(options, unique, block_bytes)
    with progress(f"planning {len(grid)} capacities", plan_steps(grid, policies)) as advance:
        plan = plan_capacity(
            requests, grid, policies, sample_rate=options.sample, processes=options.processes, on_step=advance
        )
    tiers = plan_tiers(requests, grid, tier_sizes) if tier_sizes else None
    target = options.target_hit
    if target is not None and target > plan.unbounded_hit_ratio:
        raise UsageError(
            f"--target-hit {target} is above {plan.unbounded_hit_ratio:.4f}, the hit ratio of this trace with room "
            "for every block: no capacity reaches it"
        )
    document = plan_json(plan, block_bytes=block_bytes, target=target)
    if tiers is not None:
        document["tiers"] = tier_plan_json(tiers, block_bytes=block_bytes)
    if json_path is not None:
        write_text(json_path, json.dumps(document, indent=2) + "\n")
        wrote("the plan as JSON", json_path)
    with writing():
        if options.json == STDOUT:
            print(json.dumps(document))
        else:
            print_plan(plan, block_bytes=block_bytes, target=target)
            if tiers is not None:
                print_tier_plan(tiers, block_bytes=block_bytes)
    if options.plot is not None:
        write_plan_plot(plan, options.plot, target=target)
        wrote("the plot of the curves", options.plot)
    return 0


def _tier_sizes(options: argparse.Namespace, unique: int, block_bytes: int | None) -> dict[str, int]:
    """``--tiers`` and ``--tier-capacity`` as each tier below host and its size in blocks, in lookup order."""
    from kvcontract.plan.grid import GridError, parse_capacity_grid
    from kvcontract.plan.tier_plan import HOST, TIER_KINDS

    if options.tiers is None:
        if options.tier_capacity is not None:
            raise UsageError(
                f"--tier-capacity sizes the tiers of --tiers: give --tiers host,file (or {', '.join(TIER_KINDS[1:])}) too"
            )
        return {}
    levels = [name.strip() for name in options.tiers.split(",")]
    below = levels[1:]
    if levels[0] != HOST or not below or len(set(levels)) != len(levels) or not set(below) <= set(TIER_KINDS):
        raise UsageError(
            f"--tiers {options.tiers!r}: write host first, then any of {', '.join(TIER_KINDS)} once each, "
            "e.g. host,file,redis"
        )
    sizes: dict[str, str] = {}
    for part in options.tier_capacity.split(",") if options.tier_capacity else ():
        name, equals, size = part.partition("=")
        if not equals or name.strip() not in below or name.strip() in sizes:
            raise UsageError(
                f"--tier-capacity: {part.strip()!r} is not NAME=SIZE for one of {', '.join(below)}; e.g. {below[0]}=40%"
            )
        sizes[name.strip()] = size
    missing = [name for name in below if name not in sizes]
    if missing:
        raise UsageError(
            f"--tier-capacity: give the size of {', '.join(missing)}, e.g. {missing[0]}=40% or {missing[0]}=64GiB"
        )
    blocks: dict[str, int] = {}
    for name in below:
        if ".." in sizes[name]:
            raise UsageError(f"--tier-capacity: {name}={sizes[name]} is a range; give one size per tier")
        try:
            blocks[name] = parse_capacity_grid(sizes[name], unique_blocks=unique, block_bytes=block_bytes)[0]
        except GridError as error:
            raise UsageError(f"--tier-capacity {name}: {error}") from None
    return blocks

"""The engine driver: the order in which an engine calls a manager, in a room of its own.

The replay, the simulator, the planner, the what-if observer, the engine adapters' replays
and the benchmarks serve requests through it, so their figures measure the same thing:
:mod:`.orders` holds kvcontract's order and vLLM's scheduler order, :mod:`.keys` the offload
keys of block hash ids. It stands below ``sim/``, ``plan/`` and ``observe/`` and imports only
the contracts.
"""

"""The capacity planner: miss-ratio curves (exact and SHARDS), the offline optimum, tier sizing.

It sits above the simulator (:mod:`kvcontract.sim`), whose replay it drives, and below the
command line (``kvcontract plan``); nothing in :mod:`kvcontract.sim` imports it.
"""

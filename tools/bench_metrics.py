"""What metrics cost the scheduler: replay CPU time per block without a collector and with one
read every 500 requests (as a scrape would), interleaved round by round, median of the ratios.

    python tools/bench_metrics.py
"""
import statistics
import time
from pathlib import Path

from kvcontract.enforce import configure
from kvcontract.managers import CPUOffloadingManager
from kvcontract.metrics import MetricsCollector, manager_source
from kvcontract.sim import read_trace, replay
configure(checks=False)
TRACE = Path(__file__).resolve().parents[1] / '..' / 'shared' / 'traces' / 'conversation_trace.jsonl'
reqs = [r.hash_ids for r in read_trace(TRACE)][:6000]
chunks = [reqs[i:i+500] for i in range(0, len(reqs), 500)]
def run(with_metrics):
    m = CPUOffloadingManager(3655, "lru")
    c = MetricsCollector()
    if with_metrics: c.add(manager_source(m, policy="lru"))
    cpu = blocks = 0.0
    for chunk in chunks:
        r = replay(m, chunk); cpu += r.cpu_seconds; blocks += r.blocks
        if with_metrics:
            t = time.thread_time(); c.collect(); cpu += time.thread_time() - t
    return cpu * 1e6 / blocks
ratios = []
for i in range(7):
    a, b = (run(False), run(True)) if i % 2 == 0 else tuple(reversed((run(True), run(False))))
    ratios.append(b / a); print(f"off {a:.3f} us/block, on {b:.3f} us/block, on/off {b/a:.3f}")
print("median on/off", statistics.median(ratios))

"""A shadow cache's policy, sampled: what it averages over reuses spans the traffic the primary's does."""

from __future__ import annotations

from kvcontract.observe.shadow import ShadowCache
from kvcontract.policies import PrefixReusePolicy
from kvcontract.sim import block_key


def test_a_sampled_prefix_aware_shadow_learns_the_reuse_distance_in_as_few_requests_as_the_primary() -> None:
    """At rate 0.01 the shadow sees a hundredth of the reuses; its running mean must still follow them."""
    shadow = ShadowCache(40, "prefix_reuse", rate=0.01)
    cycle = [[block_key(key)] for key in range(10)]
    for request in cycle * 30:
        shadow.serve(request)
    policy = shadow.policy
    assert isinstance(policy, PrefixReusePolicy)
    assert abs(policy.reuse_distance - 10) < 1, "every key comes back after 10 touched keys"


def test_at_rate_one_the_shadow_runs_the_registry_s_own_policy() -> None:
    policy = ShadowCache(40, "prefix_reuse").policy
    assert isinstance(policy, PrefixReusePolicy) and policy.reuse_distance == 40.0

"""Capacity, rollout and placement decisions (components.settings.capacity): pure rules, checked on the issue's
numbers."""

from __future__ import annotations

import pytest

from components.settings.capacity import (
    HOSTNAME_KEY,
    PACKING_LABEL,
    PACKING_WEIGHT,
    SPREAD_WEIGHT,
    ModelShape,
    check_capacity,
    nodes_needed,
    placement_affinity,
    placement_note,
    rollout_for,
    spread_affinity,
    spread_nodes_needed,
    surging_models,
)
from tritonft.gpu_pool import GpuPool

T5_3B = ModelShape("t5-3b", 4)
GPTJ = ModelShape("gpt-j-6b", 1)
PROD = (T5_3B, GPTJ)


def pool(nodes_min: int, nodes_max: int, *, autoscaled: bool = True, gpus: int = 4) -> GpuPool:
    return GpuPool("g5.12xlarge", gpus, nodes_min, nodes_max, autoscaled)


def test_nodes_are_counted_by_packing_whole_pods_not_by_summing_gpus() -> None:
    assert nodes_needed([3, 3], 4) == 2  # 6 GPUs "fit" 8 by sum, but no node holds two 3-GPU pods
    assert nodes_needed([4, 4, 1, 1], 4) == 3  # prod at replicasMin: the 1-GPU pods share a node
    assert nodes_needed([1] * 9, 4) == 3


def test_prod_at_replicas_min_on_the_issues_two_nodes_is_refused_without_a_node_autoscaler() -> None:
    verdict = check_capacity(PROD, 2, 2, pool(2, 2, autoscaled=False))
    assert verdict.problems == (
        "replicasMin: 2 x 4 (t5-3b) + 2 x 1 (gpt-j-6b) = 10 GPUs need 4 g5.12xlarge node(s) of 4 GPUs, but only "
        "gpuNodesMin 2 can exist; raise gpuNodesMin/gpuNodesMax to 4 or lower replicasMin",
    )


def test_replicas_min_beyond_gpu_nodes_min_but_within_the_autoscalers_max_only_warns() -> None:
    verdict = check_capacity(PROD, 2, 2, pool(2, 6))
    assert verdict.problems == ()
    assert len(verdict.warnings) == 1
    assert "the first `pulumi up` waits while the node autoscaler adds 2 node(s)" in verdict.warnings[0]
    assert "gpuNodesMin" in verdict.warnings[0]


def test_replicas_max_that_needs_more_than_gpu_nodes_max_is_refused_with_the_numbers() -> None:
    verdict = check_capacity(PROD, 2, 6, pool(3, 6))
    assert verdict.nodes_at_max == 8
    assert verdict.problems == (
        "replicasMax: 6 x 4 (t5-3b) + 6 x 1 (gpt-j-6b) = 30 GPUs need 8 g5.12xlarge node(s) of 4 GPUs, but "
        "gpuNodesMax is 6; raise gpuNodesMax to 8 or lower replicasMax",
    )


def test_the_shipped_prod_numbers_fit_at_min_and_max() -> None:
    verdict = check_capacity(PROD, 2, 6, pool(4, 8))
    assert (verdict.problems, verdict.warnings, verdict.nodes_at_min, verdict.nodes_at_max) == ((), (), 4, 8)


def test_at_replicas_min_each_models_replicas_need_nodes_of_their_own() -> None:
    # prod: the two 1-GPU gpt-j pods on two nodes (one node lost never takes the model down), t5-3b on two more.
    assert spread_nodes_needed(PROD, 2, 4) == 4
    assert nodes_needed([4, 4, 1, 1], 4) == 3, "packed, both gpt-j pods would share a node"


def test_part_node_pods_of_different_models_still_share_nodes_when_spread() -> None:
    small = (ModelShape("a", 1), ModelShape("b", 1), ModelShape("c", 2))
    assert spread_nodes_needed(small, 2, 4) == 2


def test_a_model_larger_than_one_node_is_refused_by_name() -> None:
    verdict = check_capacity((ModelShape("big", 8),), 1, 1, pool(4, 4))
    assert verdict.problems[0].startswith("models.big: needs 8 GPUs in one pod, but a g5.12xlarge node has 4")


def test_rollouts_surge_only_where_the_extra_pod_fits_the_reachable_nodes() -> None:
    # At replicasMax 6 the 8 nodes are full of t5-3b (6 whole nodes) and gpt-j (6 pods on 2 nodes): a 7th t5-3b
    # pod would need a 9th node; a 7th gpt-j pod fits the second gpt-j node.
    assert surging_models(PROD, 6, pool(3, 8)) == {"gpt-j-6b"}
    assert surging_models(PROD, 2, pool(3, 8)) == {"gpt-j-6b", "t5-3b"}
    assert surging_models(PROD, 2, pool(3, 3, autoscaled=False)) == {"gpt-j-6b"}
    assert surging_models(PROD, 2, pool(3, 6, autoscaled=False)) == {"gpt-j-6b"}  # no autoscaler: 3 nodes


@pytest.mark.parametrize(("surging", "expected"), [({"t5-3b"}, (1, 0)), (set(), (0, 1))])
def test_rollout_strategy_follows_the_surge_decision(surging: set[str], expected: tuple[int, int]) -> None:
    rollout = rollout_for(T5_3B, frozenset(surging), 2)
    assert (rollout.max_surge, rollout.max_unavailable) == expected
    assert rollout.strategy()["rollingUpdate"] == {"maxSurge": expected[0], "maxUnavailable": expected[1]}


def test_replacing_the_only_replica_says_the_model_is_down_meanwhile() -> None:
    assert "with one replica the model is down" in rollout_for(T5_3B, frozenset(), 1).reason


def test_part_node_pods_prefer_nodes_with_other_part_node_pods_and_whole_node_pods_need_no_rule() -> None:
    assert placement_affinity(4, 4) is None
    affinity = placement_affinity(1, 4)
    assert affinity is not None
    (term,) = affinity["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["weight"] == PACKING_WEIGHT
    assert term["podAffinityTerm"] == {
        "labelSelector": {"matchLabels": {PACKING_LABEL: "partial"}},
        "topologyKey": "kubernetes.io/hostname",
    }


def test_the_placement_note_says_where_each_shape_lands() -> None:
    assert placement_note(4, 4, "g5.12xlarge").startswith("one pod per g5.12xlarge node, taking all 4 GPUs")
    assert "up to 4 such pods per node" in placement_note(1, 4, "g5.12xlarge")


def test_a_models_replicas_prefer_nodes_without_one_of_their_own_above_any_packing() -> None:
    (term,) = spread_affinity({"app": "m"})["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"] == {"labelSelector": {"matchLabels": {"app": "m"}}, "topologyKey": HOSTNAME_KEY}
    # A node holding the model's own pod scores PACKING - SPREAD < 0 (an empty node's score) < PACKING.
    assert term["weight"] == SPREAD_WEIGHT > PACKING_WEIGHT > 0

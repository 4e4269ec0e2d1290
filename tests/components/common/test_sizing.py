"""Sizing formulas (components.common.sizing): each number derived from the model as documented."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from components.common import sizing
from components.common.sizing import GIB, MIB
from tests.components.fixtures import GPTJ_6B, MINILM_CPU, MINILM_GPU, T5_SMALL
from tritonft import reference_memory
from tritonft.reference_memory import largest_tensor_bytes, reference_memory_bytes
from tritonft.spec import Batching, Family, WeightDType


def test_converted_bytes_of_t5_counts_the_two_extra_embedding_copies():
    arch = T5_SMALL.architecture
    extra = 2 * arch.vocab_size * arch.d_model * T5_SMALL.weight_dtype.nbytes
    assert sizing.converted_bytes(T5_SMALL) == T5_SMALL.weight_bytes + extra


def test_converted_bytes_of_gptj_is_its_weight_bytes():
    assert GPTJ_6B.family is Family.GPTJ
    assert sizing.converted_bytes(GPTJ_6B) == GPTJ_6B.weight_bytes


def test_store_size_is_converted_bytes_times_headroom_rounded_up_to_gib():
    total = sizing.converted_bytes(T5_SMALL) + sizing.converted_bytes(GPTJ_6B)
    assert sizing.store_size_gi((T5_SMALL, GPTJ_6B), headroom=1.5) == math.ceil(total * 1.5 / GIB)


def test_store_size_is_at_least_one_gib():
    tiny = replace(T5_SMALL, architecture=replace(T5_SMALL.architecture, vocab_size=8, num_layers=1))
    assert sizing.store_size_gi((tiny,)) == 1


def test_store_headroom_below_one_is_refused():
    with pytest.raises(ValueError, match="headroom"):
        sizing.store_size_gi((T5_SMALL,), headroom=0.5)


def test_startup_budget_is_start_plus_bytes_over_bandwidth_with_margin_in_whole_periods():
    budget = sizing.startup_budget(GPTJ_6B, load_bandwidth=100 * sizing.MB, period_seconds=10)
    expected = (sizing.SERVER_START_SECONDS + sizing.converted_bytes(GPTJ_6B) / (100 * sizing.MB)) * 1.5
    assert budget.period_seconds == 10
    assert budget.failure_threshold == math.ceil(expected / 10)
    assert budget.seconds >= expected > budget.seconds - 10


def test_startup_budget_grows_with_model_size_and_shrinks_with_bandwidth():
    small = sizing.startup_budget(T5_SMALL)
    large = sizing.startup_budget(GPTJ_6B)
    fast = sizing.startup_budget(GPTJ_6B, load_bandwidth=4 * sizing.LOAD_BANDWIDTH)
    assert small.seconds < large.seconds
    assert fast.seconds < large.seconds


def test_startup_budget_refuses_a_non_positive_bandwidth():
    with pytest.raises(ValueError, match="bandwidth"):
        sizing.startup_budget(T5_SMALL, load_bandwidth=0)


def test_shm_is_one_gib_plus_256_mib_per_extra_gpu():
    assert sizing.shm_bytes(T5_SMALL) == GIB
    assert sizing.shm_bytes(GPTJ_6B) == GIB + 3 * 256 * MIB


def test_server_memory_request_accounts_for_shm():
    s = sizing.server_sizing(GPTJ_6B)
    expected = sizing.SERVER_BASE_MEMORY + sizing.shm_bytes(GPTJ_6B) + 2 * largest_tensor_bytes(GPTJ_6B)
    assert s.memory_request == f"{math.ceil(expected / MIB)}Mi"
    assert s.memory_limit == s.memory_request
    assert s.shm_size == f"{sizing.shm_bytes(GPTJ_6B) // MIB}Mi"


def test_server_gpus_are_tp_times_pp():
    model = replace(GPTJ_6B, tensor_parallel=2, pipeline_parallel=2)
    assert sizing.server_sizing(model).gpus == 4


def test_job_memory_is_base_plus_four_copies_of_the_largest_tensor():
    largest = GPTJ_6B.architecture.vocab_size * GPTJ_6B.architecture.d_model * 4
    assert largest_tensor_bytes(GPTJ_6B) == largest
    assert sizing.job_sizing(GPTJ_6B).memory_request == f"{math.ceil((GIB + 4 * largest) / MIB)}Mi"


def test_the_reference_job_holds_every_weight_at_fp32_and_their_fp32_conversion():
    job = sizing.judge_reference_job_sizing(GPTJ_6B)
    assert job.memory_request == job.memory_limit == f"{math.ceil(reference_memory_bytes(GPTJ_6B) / MIB)}Mi"
    assert reference_memory_bytes(GPTJ_6B) >= GPTJ_6B.parameters * 4 * reference_memory.WEIGHT_FACTOR
    scratch = sizing.download_bytes(GPTJ_6B) * 1.2 + GPTJ_6B.parameters * 4
    assert int(job.scratch_size.removesuffix("Gi")) * GIB >= scratch
    assert job.cpu_request == str(sizing.JUDGE_REFERENCE_CPU)


def test_the_reference_jobs_deadline_is_its_download_and_its_step():
    dl = sizing.download_bytes(GPTJ_6B)
    seconds = (
        2 * dl / sizing.DOWNLOAD_BANDWIDTH + 600 + sizing.judge_reference_seconds(GPTJ_6B, sizing.CONVERT_BANDWIDTH)
    )
    job = sizing.judge_reference_job_sizing(GPTJ_6B)
    assert job.active_deadline_seconds == 60 * math.ceil(seconds / 60)
    steps = 2 * GPTJ_6B.parameters * sizing.judge_reference_tokens(GPTJ_6B) / sizing.JUDGE_REFERENCE_FLOPS
    assert sizing.judge_reference_seconds(GPTJ_6B, sizing.CONVERT_BANDWIDTH) >= steps


def test_only_fastertransformer_generators_have_a_reference_job():
    with pytest.raises(ValueError, match="only T5/GPT-2/GPT-J"):
        sizing.judge_reference_job_sizing(MINILM_CPU)


def test_job_scratch_holds_the_download_with_margin():
    job = sizing.job_sizing(GPTJ_6B)
    scratch_gib = int(job.scratch_size.removesuffix("Gi"))
    assert scratch_gib * GIB >= sizing.download_bytes(GPTJ_6B) * 1.2
    assert int(job.ephemeral_request.removesuffix("Gi")) > scratch_gib


def test_job_deadline_follows_the_formula_in_whole_minutes():
    dl, conv = sizing.download_bytes(GPTJ_6B), sizing.converted_bytes(GPTJ_6B)
    seconds = 2 * (dl / sizing.DOWNLOAD_BANDWIDTH + conv / sizing.CONVERT_BANDWIDTH) + 600
    job = sizing.job_sizing(GPTJ_6B)
    assert job.active_deadline_seconds == 60 * math.ceil(seconds / 60), "the reference Job's time is not added"


def test_the_reference_job_retries_once_and_is_waited_for_both_tries():
    job = sizing.judge_reference_job_sizing(GPTJ_6B)
    assert job.backoff_limit == sizing.JUDGE_REFERENCE_BACKOFF_LIMIT == 1
    assert job.pulumi_timeout_minutes * 60 >= 2 * job.active_deadline_seconds + sizing.NODE_SCALE_UP_SECONDS
    longer = replace(GPTJ_6B, max_output_len=4096, name="long")  # the steps are capped: the same reference
    assert sizing.judge_reference_job_sizing(longer) == job


def test_pulumi_waits_for_every_job_attempt_plus_a_node_scale_up():
    job = sizing.job_sizing(T5_SMALL)
    waited = job.pulumi_timeout_minutes * 60
    assert waited >= (job.backoff_limit + 1) * job.active_deadline_seconds + sizing.NODE_SCALE_UP_SECONDS


def test_slower_download_bandwidth_lengthens_the_job_deadline():
    slow = sizing.job_sizing(GPTJ_6B, download_bw=5 * sizing.MB)
    assert slow.active_deadline_seconds > sizing.job_sizing(GPTJ_6B).active_deadline_seconds


def test_fp16_weights_halve_the_store_bytes_of_gptj():
    fp32 = replace(GPTJ_6B, weight_dtype=WeightDType.FP32)
    assert sizing.converted_bytes(fp32) == 2 * sizing.converted_bytes(GPTJ_6B)


def test_scale_down_window_is_twice_a_cold_start_within_api_bounds():
    budget = sizing.startup_budget(GPTJ_6B)
    window = sizing.scale_down_window_seconds(budget)
    assert window == min(3600, max(600, 2 * (budget.seconds + sizing.NODE_SCALE_UP_SECONDS)))
    huge = sizing.StartupBudget(period_seconds=10, failure_threshold=1000)
    assert sizing.scale_down_window_seconds(huge) == 3600


def test_progress_deadline_outlasts_the_startup_budget():
    budget = sizing.startup_budget(GPTJ_6B)
    assert sizing.progress_deadline_seconds(budget) > budget.seconds


EDGE_DRAIN_S = 315
"""A Triton pod's terminationGracePeriodSeconds when its model is exposed on the edge (the gateway's longest request
is not the bound: a client's is)."""


def test_the_rollout_watch_deadline_adds_the_replaced_pod_s_drain_to_a_startup():
    budget = sizing.startup_budget(GPTJ_6B)
    without = 60 * sizing.rollout_timeout_minutes(budget, 120)
    with_drain = 60 * sizing.rollout_timeout_minutes(budget, 120, EDGE_DRAIN_S)
    assert with_drain >= budget.seconds + 120 + sizing.NODE_SCALE_UP_SECONDS + EDGE_DRAIN_S
    assert with_drain - without >= EDGE_DRAIN_S - 59


def test_the_progress_deadline_adds_the_replaced_pod_s_drain():
    budget = sizing.startup_budget(GPTJ_6B)
    assert sizing.progress_deadline_seconds(budget, 0, EDGE_DRAIN_S) == (
        sizing.progress_deadline_seconds(budget) + EDGE_DRAIN_S
    )


def test_a_model_whose_reference_fits_the_cap_gets_the_generation_check_and_its_memory():
    job = sizing.job_sizing(T5_SMALL)
    assert reference_memory_bytes(T5_SMALL) <= sizing.REFERENCE_MEMORY_CAP
    assert job.verify_generation
    assert job.memory_request == f"{math.ceil(reference_memory_bytes(T5_SMALL) / MIB)}Mi"


def test_a_model_too_large_for_the_reference_is_converted_without_the_check():
    job = sizing.job_sizing(GPTJ_6B)
    assert reference_memory_bytes(GPTJ_6B) > sizing.REFERENCE_MEMORY_CAP
    assert not job.verify_generation


def test_turning_the_check_off_keeps_the_streaming_converters_memory_and_deadline():
    off = sizing.job_sizing(T5_SMALL, verify_generation=False)
    largest = largest_tensor_bytes(T5_SMALL)
    assert not off.verify_generation
    assert off.memory_request == f"{math.ceil((GIB + 4 * largest) / MIB)}Mi"
    on = sizing.job_sizing(T5_SMALL)
    assert on.active_deadline_seconds >= off.active_deadline_seconds + 60 * math.floor(
        sizing.reference_seconds(T5_SMALL) / 60
    )


def test_a_cpu_encoder_pod_has_no_gpu_and_a_small_shm():
    server = sizing.server_sizing(MINILM_CPU)
    assert server.gpus == 0
    assert server.shm_size == sizing.quantity_mi(sizing.CPU_SHM)


def test_a_cpu_encoders_memory_is_base_shm_and_per_instance_weights_and_arena():
    weights = sizing.converted_bytes(MINILM_CPU)
    activations = sizing.encoder_activation_bytes(MINILM_CPU)
    one = sizing.CPU_SERVER_BASE_MEMORY + sizing.CPU_SHM + 2 * weights + 2 * activations
    assert sizing.server_sizing(MINILM_CPU).memory_request == sizing.quantity_mi(one)
    two = replace(MINILM_CPU, instances=2)
    assert sizing.server_sizing(two).memory_request == sizing.quantity_mi(one + 2 * weights + 2 * activations)


def test_an_encoders_activations_grow_with_batch_and_sequence_length():
    base = sizing.encoder_activation_bytes(MINILM_CPU)
    assert sizing.encoder_activation_bytes(replace(MINILM_CPU, batching=Batching(max_batch_size=16))) == 2 * base
    assert MINILM_CPU.encoder is not None
    longer = replace(MINILM_CPU, encoder=replace(MINILM_CPU.encoder, max_seq_length=512))
    assert sizing.encoder_activation_bytes(longer) > 2 * base


def test_a_cpu_encoder_asks_one_core_per_onnx_instance_plus_one():
    assert sizing.server_sizing(MINILM_CPU).cpu_request == "2"
    assert sizing.server_sizing(replace(MINILM_CPU, instances=3)).cpu_request == "4"
    assert sizing.server_sizing(MINILM_CPU).cpu_limit == "4"


def test_a_gpu_encoder_takes_one_gpu_like_a_one_gpu_generator():
    server = sizing.server_sizing(MINILM_GPU)
    assert server.gpus == 1
    assert server.shm_size == sizing.quantity_mi(sizing.GIB)


def test_an_encoders_conversion_job_holds_four_copies_of_its_fp32_weights_with_or_without_the_answer_check():
    checked = sizing.job_sizing(MINILM_CPU, verify_generation=True)
    unchecked = sizing.job_sizing(MINILM_CPU, verify_generation=False)
    fp32 = MINILM_CPU.parameters * 4
    assert checked.memory_request == unchecked.memory_request == sizing.quantity_mi(sizing.JOB_BASE_MEMORY + 4 * fp32)
    assert (checked.verify_generation, unchecked.verify_generation) == (True, False)


def test_an_encoders_answer_check_adds_its_minute_to_the_jobs_deadline():
    checked = sizing.job_sizing(MINILM_CPU, verify_generation=True)
    unchecked = sizing.job_sizing(MINILM_CPU, verify_generation=False)
    assert checked.active_deadline_seconds - unchecked.active_deadline_seconds == sizing.ENCODER_CHECK_SECONDS


def test_the_activation_rule_refuses_a_generator():
    with pytest.raises(ValueError, match="not an encoder"):
        sizing.encoder_activation_bytes(T5_SMALL)


def test_an_encoder_takes_its_onnx_weights_twice_in_the_store_checkpoint_and_repository_copy():
    assert sizing.stored_bytes(MINILM_CPU) == 2 * sizing.converted_bytes(MINILM_CPU)
    assert sizing.stored_bytes(T5_SMALL) == sizing.converted_bytes(T5_SMALL)


def test_the_stacks_default_load_bandwidth_is_no_faster_than_the_network_volume_it_cites() -> None:
    from components.settings.schema import STACK_KNOBS

    (knob,) = [k for k in STACK_KNOBS if k.key == "loadBandwidthMiBps"]
    assert knob.default * sizing.MIB <= sizing.LOAD_BANDWIDTH, "a faster assumption lets the startup probe kill a load"


def test_a_vllm_engines_cpu_limit_is_its_nodes_cpus() -> None:
    assert sizing.vllm_cpu_limit(3, 48) == 48


def test_a_vllm_engines_cpu_limit_is_never_below_its_request() -> None:
    assert sizing.vllm_cpu_limit(10, 8) == 10


def test_a_vllm_engine_on_a_node_not_known_keeps_twice_its_request() -> None:
    assert sizing.vllm_cpu_limit(3, None) == 6


def test_the_reference_step_counts_its_near_ties_branches_within_their_budget() -> None:
    from tritonft.probe.judge_reference import BRANCH_TOKENS

    assert BRANCH_TOKENS[Family.GPTJ] == 32
    assert sizing.judge_reference_tokens(GPTJ_6B) == 4 * (32 + 32), "4 prompts x (32 steps + 32 of branches)"


def test_a_vllm_models_reference_step_counts_its_prompts_its_chat_and_their_branches() -> None:
    from tests.tritonft.engines.vllm.test_engine import LLAMA_8B

    prompts = 4 * sizing.VLLM_REFERENCE_PROMPT_TOKENS + 1 * sizing.VLLM_REFERENCE_CHAT_TOKENS
    greedy = 4 * (16 + 16) + 1 * (16 + 16)  # each prompt's and the chat's 16 steps and 16 tokens of branches
    seconds = sizing.converted_bytes(LLAMA_8B) / sizing.CONVERT_BANDWIDTH
    seconds += (prompts + greedy) * 2 * LLAMA_8B.parameters / sizing.JUDGE_REFERENCE_FLOPS

    assert sizing.vllm_reference_seconds(LLAMA_8B) == pytest.approx(seconds)

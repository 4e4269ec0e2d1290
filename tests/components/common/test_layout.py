"""Names and store layout (components.common.layout): content-keyed, DNS-safe, deterministic."""

from __future__ import annotations

from dataclasses import replace

import pytest

from components.common.layout import conversion_job_name, dns_label, model_paths, reference_key
from tests.components.fixtures import CONVERTER, GPTJ_6B, T5_SMALL
from tritonft.spec import Batching, DataType, WeightDType


def test_dns_label_lowercases_replaces_symbols_and_trims():
    assert dns_label("My_Model.v2--") == "my-model-v2"
    assert len(dns_label("x" * 100)) == 63


def test_dns_label_refuses_a_name_without_letters_or_digits():
    with pytest.raises(ValueError, match="no letters or digits"):
        dns_label("__--")


def test_job_name_is_deterministic_and_a_valid_label():
    name = conversion_job_name(GPTJ_6B, CONVERTER)
    assert name == conversion_job_name(GPTJ_6B, CONVERTER)
    assert len(name) <= 63
    assert name == dns_label(name)


def test_job_name_contains_the_conversion_key():
    assert GPTJ_6B.conversion_key(CONVERTER) in conversion_job_name(GPTJ_6B, CONVERTER)


def test_job_name_changes_with_the_revision():
    moved = replace(GPTJ_6B, revision="0" * 40)
    assert conversion_job_name(moved, CONVERTER) != conversion_job_name(GPTJ_6B, CONVERTER)


def test_job_name_changes_with_the_converter_version():
    assert conversion_job_name(T5_SMALL, "0.2.0") != conversion_job_name(T5_SMALL, CONVERTER)


def test_a_serving_knob_changes_the_repository_but_not_the_checkpoint():
    rebatched = replace(T5_SMALL, batching=Batching(max_batch_size=32))
    before, after = model_paths(T5_SMALL, CONVERTER), model_paths(rebatched, CONVERTER)
    assert after.checkpoint_dir == before.checkpoint_dir
    assert after.repository_dir != before.repository_dir


def test_a_long_model_name_still_fits_with_the_keys():
    long = replace(T5_SMALL, name="a-very-long-model-name-that-goes-on-and-on-and-on-forever")
    name = conversion_job_name(long, CONVERTER)
    assert len(name) <= 63
    assert name.endswith(long.conversion_key(CONVERTER) + "-" + name.rsplit("-", 1)[1])


def test_the_compile_cache_root_is_the_keys_directory_in_the_models() -> None:
    from components.common.layout import compile_cache_root

    assert compile_cache_root("/models/compile-cache/llama", "0123456789abcdef") == (
        "/models/compile-cache/llama/0123456789abcdef"
    )


@pytest.mark.parametrize("key", ["", "a/b", ".pruning-0123456789abcdef", ".."])
def test_a_compile_cache_key_that_is_not_one_plain_segment_is_refused(key: str) -> None:
    from components.common.layout import compile_cache_root

    with pytest.raises(ValueError, match="not a compile cache key"):
        compile_cache_root("/models/compile-cache/llama", key)


def test_an_ft_models_compute_type_keys_its_judge_reference_as_its_tolerance_depends_on_it():
    fp16_compute = replace(T5_SMALL, weight_dtype=WeightDType.FP32, data_type=DataType.FP16)
    fp32_compute = replace(fp16_compute, data_type=DataType.FP32)
    assert reference_key(fp16_compute, CONVERTER) != reference_key(fp32_compute, CONVERTER)
    assert model_paths(fp16_compute, CONVERTER).checkpoint_dir == model_paths(fp32_compute, CONVERTER).checkpoint_dir

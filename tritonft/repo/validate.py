"""Up-front checks of a ``ModelSpec`` for rendering: every problem at once, each naming the field and the fix."""

from __future__ import annotations

from tritonft.repo.naming import MODEL_NAME_PATTERN
from tritonft.spec import Family, ModelSpec

INT8_MODES = (0, 1)


def spec_problems(spec: ModelSpec, model_root: str = "/models") -> list[str]:
    """Everything that would make the rendered repository wrong or unloadable."""
    problems: list[str] = []
    if not MODEL_NAME_PATTERN.match(spec.name):
        problems.append(
            f"name: {spec.name!r} is not a usable Triton model name; use letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    if spec.tensor_parallel < 1:
        problems.append(f"tensor_parallel: {spec.tensor_parallel} must be at least 1")
    elif spec.architecture.num_heads % spec.tensor_parallel:
        problems.append(
            f"tensor_parallel: {spec.tensor_parallel} does not divide num_heads={spec.architecture.num_heads}"
        )
    if spec.pipeline_parallel < 1:
        problems.append(f"pipeline_parallel: {spec.pipeline_parallel} must be at least 1")
    if spec.instances < 1:
        problems.append(f"instances: {spec.instances} must be at least 1")
    if spec.int8_mode and spec.family is not Family.GPT2:
        problems.append(f"int8_mode: {spec.int8_mode} is only supported for family gpt2; set it to 0")
    elif spec.int8_mode not in INT8_MODES:
        problems.append(f"int8_mode: {spec.int8_mode} must be 0 (off) or 1 (weight-only int8)")
    batching = spec.batching
    if batching.max_batch_size < 1:
        problems.append(f"batching.max_batch_size: {batching.max_batch_size} must be at least 1")
    if batching.max_queue_delay_us < 0:
        problems.append(f"batching.max_queue_delay_us: {batching.max_queue_delay_us} must not be negative")
    for size in batching.preferred_batch_sizes:
        if not 1 <= size <= batching.max_batch_size:
            problems.append(
                f"batching.preferred_batch_sizes: {size} is outside 1..max_batch_size={batching.max_batch_size}"
            )
    if len(set(batching.preferred_batch_sizes)) != len(batching.preferred_batch_sizes):
        problems.append(f"batching.preferred_batch_sizes: {list(batching.preferred_batch_sizes)} has duplicates")
    if spec.max_input_len < 1:
        problems.append(f"max_input_len: {spec.max_input_len} must be at least 1")
    if spec.max_output_len < 1:
        problems.append(f"max_output_len: {spec.max_output_len} must be at least 1")
    if not model_root.startswith("/"):
        problems.append(f"model_root: {model_root!r} must be the absolute path Triton sees the repository at")
    return problems

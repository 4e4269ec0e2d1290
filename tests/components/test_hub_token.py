"""The stack's Hugging Face token reaches only the Jobs of repositories that may need it (issue 51): a gated
catalog repository or one outside the catalog; the catalog's public models download without it, so in prod only
the Llama Job holds the token, and review stacks (no token at all) are unaffected."""

from __future__ import annotations

from typing import Any

import pytest

from components.settings.catalog import hub_token_needed
from tests.components.serving.test_monitoring_rules import of_kind, rendered
from tests.plans import StackPlans


@pytest.mark.parametrize(
    ("repo", "needed"),
    [
        ("t5-3b", False),
        ("EleutherAI/gpt-j-6b", False),
        ("sentence-transformers/all-MiniLM-L6-v2", False),
        ("Qwen/Qwen2.5-7B-Instruct", False),
        ("meta-llama/Llama-3.1-8B-Instruct", True),  # gated: Meta's licence
        ("acme/our-private-t5", True),  # outside the catalog: may be private or gated
    ],
)
def test_a_token_is_needed_only_for_gated_or_unknown_repositories(repo: str, needed: bool) -> None:
    assert hub_token_needed(repo) is needed


def _token_volumes(job: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == "hf-token"]


def test_in_prod_only_the_gated_models_job_holds_the_token(stack_plan: StackPlans) -> None:
    docs = rendered(stack_plan("prod"))
    jobs = {j["metadata"]["labels"]["triton-ft/model"]: j for j in of_kind(docs, "Job") if "conversion" in str(j)}
    assert {"t5-3b", "gpt-j-6b", "minilm", "llama-3-1-8b"} <= set(jobs)
    holding = {model for model, job in jobs.items() if _token_volumes(job)}
    assert holding == {"llama-3-1-8b"}
    secrets = {s["metadata"]["name"] for s in of_kind(docs, "Secret") if s["metadata"]["name"].endswith("-hf-token")}
    assert secrets == {"prod-llama-3-1-8b-convert-hf-token"}

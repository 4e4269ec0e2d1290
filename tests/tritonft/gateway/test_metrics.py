"""The gateway's Prometheus series as they are scraped (the text exposition format)."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest

from tritonft.gateway.metrics import GatewayMetrics


def exposition(metrics: GatewayMetrics) -> str:
    return generate_latest(metrics.registry).decode()


def test_every_served_models_demand_series_exists_at_zero_before_any_request() -> None:
    # rate() sees no increase in a series that first appears at 1: the first request for a model scaled to zero
    # would not wake it.
    text = exposition(GatewayMetrics(("t5", "gpt2")))
    assert 'tritonft_gateway_model_requests_total{model="t5"} 0.0' in text
    assert 'tritonft_gateway_model_requests_total{model="gpt2"} 0.0' in text


def test_demand_counts_requests_for_a_model_whatever_their_answer() -> None:
    metrics = GatewayMetrics(("t5",))
    metrics.answered("completions", "t5", 200, 0.01)
    metrics.answered("completions", "t5", 503, 0.01)
    assert 'tritonft_gateway_model_requests_total{model="t5"} 2.0' in exposition(metrics)


def test_a_request_naming_no_served_model_is_no_demand() -> None:
    metrics = GatewayMetrics(("t5",))
    metrics.answered("completions", "", 400, 0.01)
    assert 'tritonft_gateway_model_requests_total{model=""}' not in exposition(metrics)


def test_every_series_the_gateway_serves_is_documented_in_the_gateway_page_with_its_type_and_labels() -> None:
    readme = (Path(__file__).resolve().parents[3] / "docs" / "use" / "gateway.md").read_text(encoding="utf-8")
    documented = {
        cells[0].strip("` "): (cells[1].strip(), {label.strip("` ") for label in cells[2].split(",")})
        for line in readme.splitlines()
        if line.startswith("| `tritonft_gateway_")
        for cells in [line.strip("|").split("|")]
    }
    metrics = GatewayMetrics(("t5",))
    metrics.answered("completions", "t5", 200, 0.1)  # labelled series exist once observed
    metrics.triton_waited("t5", 0.1)
    metrics.triton_first_response("t5", 0.1)
    metrics.triton_called("t5", 1)
    served = {
        f"{family.name}_total" if family.type == "counter" else family.name: (
            family.type,
            {label for sample in family.samples for label in sample.labels} - {"le"},
        )
        for family in metrics.registry.collect()
    }
    assert documented == served

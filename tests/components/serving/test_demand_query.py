"""The demand that wakes a model scaled to zero (the ScaledObject's request-rate query,
``components.serving.autoscaling.demand_query``), evaluated by Debian's real ``promtool`` on series scraped every 15 s.

nginx creates a series (per status, method, path) with the request it counts, so the first request for a sleeping
model arrives as a series born at 1; the OpenAI gateway exposes every model's series from 0. Figures are requests/s
times 10^6, rounded (promtool compares sample values exactly).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from components.serving.autoscaling import GatewayDemand, demand_query
from tests.components.serving.test_monitoring_rules import promtool

NAMESPACE = "triton"
INGRESS = 'nginx_ingress_controller_requests{exported_namespace="triton",ingress="m-http",status="503"}'
GATEWAY = 'tritonft_gateway_model_requests_total{namespace="triton",job="gw",model="m"}'
BOTH = demand_query(NAMESPACE, ("m-http", "m-grpc"), GatewayDemand(job="gw", model="m"))
INGRESS_ONLY = demand_query(NAMESPACE, ("m-http",), None)


def assert_demand(query: str | None, series: dict[str, str], at_s: int, micro_rps: int, tmp_path: Path) -> None:
    """``query`` evaluated at ``at_s`` over ``series`` (promtool's ``values`` notation, one sample per 15 s)."""
    assert query is not None
    test = {
        "rule_files": [],
        "evaluation_interval": "15s",
        "tests": [
            {
                "interval": "15s",
                "input_series": [{"series": name, "values": values} for name, values in series.items()],
                "promql_expr_test": [
                    {
                        "expr": f"round(({query}) * 1e6)",
                        "eval_time": f"{at_s}s",
                        "exp_samples": [{"labels": "{}", "value": micro_rps}],
                    }
                ],
            }
        ],
    }
    (tmp_path / "demand_test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    result = promtool("test", "rules", "demand_test.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_first_request_through_the_ingress_is_demand(tmp_path: Path) -> None:
    # No series for 2 minutes, then nginx counts the first (503) request: the series is born at 1.
    assert_demand(INGRESS_ONLY, {INGRESS: "_x8 1x20"}, at_s=150, micro_rps=8333, tmp_path=tmp_path)


def test_a_first_request_is_no_longer_demand_once_the_window_passed(tmp_path: Path) -> None:
    assert_demand(INGRESS_ONLY, {INGRESS: "_x8 1x20"}, at_s=300, micro_rps=0, tmp_path=tmp_path)


def test_steady_ingress_traffic_is_its_request_rate_and_nothing_more(tmp_path: Path) -> None:
    # 2 requests per 15 s since long before the window: 0.1333 requests/s, no series born in the window.
    assert_demand(INGRESS_ONLY, {INGRESS: "1+2x30"}, at_s=300, micro_rps=133333, tmp_path=tmp_path)


def test_no_series_at_all_is_zero_demand_not_an_empty_result(tmp_path: Path) -> None:
    unrelated = 'nginx_ingress_controller_requests{exported_namespace="other",ingress="x",status="200"}'
    assert_demand(BOTH, {unrelated: "1+1x20"}, at_s=150, micro_rps=0, tmp_path=tmp_path)


def test_the_first_request_through_the_gateway_is_demand(tmp_path: Path) -> None:
    assert_demand(BOTH, {GATEWAY: "0x8 1x20"}, at_s=150, micro_rps=8333, tmp_path=tmp_path)


def test_both_ways_in_add_up(tmp_path: Path) -> None:
    assert_demand(BOTH, {INGRESS: "_x8 1x20", GATEWAY: "0x8 1x20"}, at_s=150, micro_rps=16667, tmp_path=tmp_path)


def test_without_counting_born_series_the_first_ingress_request_would_be_invisible(tmp_path: Path) -> None:
    """Why the query has a second term: ``rate()`` alone gives 0 for a series born at 1 (this test pins the
    reason; if Prometheus ever counted the birth itself, the second term would count it twice)."""
    rate_only = f"sum(rate({INGRESS}[120s])) or vector(0)"
    assert_demand(rate_only, {INGRESS: "_x8 1x20"}, at_s=150, micro_rps=0, tmp_path=tmp_path)

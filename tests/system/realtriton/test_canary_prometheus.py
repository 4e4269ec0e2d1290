"""The canary phase's comparison evaluated by a real Prometheus (Debian's ``prometheus``).

The samples are Triton's own series, as the stack's ServiceMonitor labels them (``job`` = the Service the pod is
scraped through: the user-facing one for the stable version, the candidate Service for the candidate), written into
Prometheus' storage with ``promtool tsdb create-blocks-from openmetrics`` at 15 s (the ServiceMonitor's interval),
so each case has exactly the traffic it names: a candidate equal to the stable, one worse on errors, one worse on
p95. The gate's own queries (:func:`components.serving.promotion_gate.measure`) are asked of the real server at the
phase's end and the real verdict is given their answers.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from components.serving.canary import VersionSample, canary_verdict
from components.serving.promotion_gate import measure, prometheus_query
from components.settings.model import CanarySettings
from tests.system.realtriton.prometheus import LocalPrometheus

pytestmark = pytest.mark.slow

MODEL = "t5-small"
STABLE_JOB = "t5-small"
CANDIDATE_JOB = "t5-small-abcd1234"
DURATION_S = 300
SCRAPE_S = 15
POLICY = CanarySettings(
    enabled=True,
    duration_s=DURATION_S,
    max_error_ratio_increase_percent=1,
    max_latency_increase_percent=20,
    min_requests=50,
)


@dataclass(frozen=True)
class Pod:
    """One scraped pod: its request rates (per second) and its p95 (ms)."""

    job: str
    name: str
    ok_per_s: float
    failed_per_s: float
    p95_ms: float


CASES: dict[str, tuple[Pod, ...]] = {
    # two stable pods (10 req/s each, 0.5% failed; p95 90 and 100 ms), one candidate pod at a tenth of the traffic
    "equal": (
        Pod(STABLE_JOB, "t5-small-old-a", 9.95, 0.05, 90.0),
        Pod(STABLE_JOB, "t5-small-old-b", 9.95, 0.05, 100.0),
        Pod(CANDIDATE_JOB, "t5-small-new-a", 1.99, 0.01, 100.0),
    ),
    "errors": (
        Pod(STABLE_JOB, "t5-small-old-a", 9.95, 0.05, 90.0),
        Pod(STABLE_JOB, "t5-small-old-b", 9.95, 0.05, 100.0),
        Pod(CANDIDATE_JOB, "t5-small-new-a", 1.8, 0.2, 100.0),
    ),
    "latency": (
        Pod(STABLE_JOB, "t5-small-old-a", 9.95, 0.05, 90.0),
        Pod(STABLE_JOB, "t5-small-old-b", 9.95, 0.05, 100.0),
        Pod(CANDIDATE_JOB, "t5-small-new-a", 1.99, 0.01, 180.0),
    ),
}
"""Namespace -> its pods (one namespace per case, all in one Prometheus)."""


def openmetrics(cases: dict[str, tuple[Pod, ...]], start: int, end: int) -> str:
    """Every case's series from ``start`` to ``end`` (seconds), one sample per scrape, grouped by metric family."""
    families: dict[str, list[str]] = {
        "nv_inference_request_success": [],
        "nv_inference_request_failure": [],
        "nv_inference_request_summary_us": [],
    }
    for namespace, pods in cases.items():
        for pod in pods:
            labels = f'namespace="{namespace}",job="{pod.job}",model="{MODEL}",pod="{pod.name}"'
            for t in range(start, end + 1, SCRAPE_S):
                elapsed = t - start
                families["nv_inference_request_success"].append(
                    f"nv_inference_request_success{{{labels}}} {pod.ok_per_s * elapsed:.3f} {t}"
                )
                families["nv_inference_request_failure"].append(
                    f"nv_inference_request_failure{{{labels}}} {pod.failed_per_s * elapsed:.3f} {t}"
                )
                families["nv_inference_request_summary_us"].append(
                    f'nv_inference_request_summary_us{{{labels},quantile="0.95"}} {pod.p95_ms * 1000:.1f} {t}'
                )
    return "\n".join(line for lines in families.values() for line in lines) + "\n# EOF\n"


@dataclass(frozen=True)
class Served:
    prometheus: LocalPrometheus
    phase_end: int


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: run `bash scripts/setup/prometheus.sh` (Debian package prometheus)"
    workdir = tmp_path_factory.mktemp("canary-prometheus")
    end = int(time.time()) - 120
    source = workdir / "phase.om"
    source.write_text(openmetrics(CASES, end - 2 * DURATION_S, end))
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(workdir / "data")],
        check=True,
        capture_output=True,
    )
    prometheus = LocalPrometheus(workdir, rule_files=[], targets=[])
    prometheus.start()
    try:
        yield Served(prometheus, end)
    finally:
        prometheus.stop()


def samples(served: Served, namespace: str) -> tuple[VersionSample, VersionSample]:
    query = prometheus_query(served.prometheus.url, at=served.phase_end)
    return (
        measure(query, namespace, CANDIDATE_JOB, MODEL, DURATION_S),
        measure(query, namespace, STABLE_JOB, MODEL, DURATION_S),
    )


def test_prometheus_gives_each_versions_requests_errors_and_worst_pod_p95(served: Served) -> None:
    candidate, stable = samples(served, "equal")
    # increase() over the 300 s window, extrapolated by Prometheus from the 15 s samples: within a sample's worth
    assert stable.requests == pytest.approx(2 * 10 * DURATION_S, rel=0.06)
    assert stable.error_ratio == pytest.approx(0.005, rel=1e-6)
    assert stable.p95_ms == pytest.approx(100.0)  # the worse of the two stable pods
    assert candidate.requests == pytest.approx(2 * DURATION_S, rel=0.06)
    assert candidate.p95_ms == pytest.approx(100.0)


def test_a_candidate_equal_to_the_stable_is_promoted(served: Served) -> None:
    candidate, stable = samples(served, "equal")
    verdict = canary_verdict(candidate, stable, POLICY)
    assert verdict.passed, verdict.summary()


def test_a_candidate_worse_on_errors_is_refused_on_its_error_ratio(served: Served) -> None:
    candidate, stable = samples(served, "errors")
    verdict = canary_verdict(candidate, stable, POLICY)
    assert [f.metric for f in verdict.failures] == ["error_ratio"]
    (failed,) = verdict.failures
    assert failed.candidate == pytest.approx(0.1, rel=1e-6)
    assert failed.stable == pytest.approx(0.005, rel=1e-6)
    assert "error ratio: candidate 10.00%" in failed.message
    assert "stable 0.50%" in failed.message
    assert "threshold 1.50%" in failed.message


def test_a_candidate_worse_on_p95_is_refused_on_its_latency(served: Served) -> None:
    candidate, stable = samples(served, "latency")
    verdict = canary_verdict(candidate, stable, POLICY)
    assert [f.metric for f in verdict.failures] == ["latency_p95"]
    (failed,) = verdict.failures
    assert "candidate 180.0 ms, stable 100.0 ms; threshold 120.0 ms" in failed.message


def test_a_version_without_series_has_no_requests_and_no_p95(served: Served) -> None:
    query = prometheus_query(served.prometheus.url, at=served.phase_end)
    assert measure(query, "equal", "t5-small-00000000", MODEL, DURATION_S) == VersionSample(0.0, 0.0, None)


def test_the_served_storage_holds_only_the_written_cases(served: Served) -> None:
    query = prometheus_query(served.prometheus.url, at=served.phase_end)
    assert query("count(count by (namespace) (nv_inference_request_success))") == len(CASES)

"""The vLLM pod's readinessProbe command, run as the kubelet runs it, against a stand-in for the pod's Triton: its
``/metrics`` (vLLM's families, as NVIDIA's backend and the image's gauges name them) and its HTTP ``generate``.

Busy, the probe reads the engine's progress and sends no token (a token would queue behind the load: past the
probe's timeout every pod would go unready at once); idle, it asks one token. The real engine's side (the probe
passes, the engine's process is killed, it fails) is ``tests/system/realtriton/test_vllm_engine.py``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.threaded_server import serving
from tritonft.engines.vllm import health

MODEL = "llama"


@dataclass
class StandInTriton:
    """What the pod's Triton answers: vLLM's families for :data:`MODEL` (and another model's, to be ignored), and
    one token from ``generate`` unless the engine is dead."""

    running: float = 0
    waiting: float = 0
    prompt_tokens: float = 0
    generation_tokens: float = 0
    gauges: bool = True
    engine_dead: bool = False
    tokens_asked: list[str] = field(default_factory=list)

    def metrics(self) -> str:
        labels = f'model="{MODEL}",version="1"'
        other = 'model="llama-2",version="1"'
        lines = [
            "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{{{labels}}} {self.prompt_tokens}",
            f"vllm:prompt_tokens_total{{{other}}} 999",
            f"vllm:generation_tokens_total{{{labels}}} {self.generation_tokens}",
            f"vllm:generation_tokens_total{{{other}}} 999",
            f'vllm:time_to_first_token_seconds_bucket{{{labels},le="1.0"}} 4',
        ]
        if self.gauges:
            lines += [
                f"vllm:num_requests_running{{{labels}}} {self.running}",
                f"vllm:num_requests_waiting{{{labels}}} {self.waiting}",
                f"vllm:num_requests_running{{{other}}} 7",
            ]
        return "\n".join(lines) + "\n"


@pytest.fixture
def triton() -> Iterator[tuple[StandInTriton, str]]:
    state = StandInTriton()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            return None

        def do_GET(self) -> None:  # http.server's name
            body = state.metrics().encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # http.server's name
            self.rfile.read(int(self.headers["Content-Length"]))
            state.tokens_asked.append(self.path)
            status, answer = (
                (500, {"error": "Error generating stream: EngineCore encountered an issue."})
                if state.engine_dead
                else (200, {"model_name": MODEL, "text_output": " the"})
            )
            if not state.engine_dead:  # the token's own count, as vLLM's counters take it
                state.prompt_tokens, state.generation_tokens = state.prompt_tokens + 2, state.generation_tokens + 1
            body = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with serving(server):
        yield state, f"http://127.0.0.1:{server.server_address[1]}"


def probe(
    url: str, tmp_path: Path, kind: str = "readiness", idle_after_s: float | None = None
) -> subprocess.CompletedProcess[str]:
    command = health.generate_command(
        MODEL,
        url=url,
        timeout_s=5,
        metrics_url=f"{url}/metrics",
        state=str(tmp_path / kind),
        probe=kind,
        idle_after_s=idle_after_s,
    )
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=health.TIMEOUT_S)


def test_an_idle_engine_is_ready_when_it_generates_a_token(triton: tuple[StandInTriton, str], tmp_path: Path) -> None:
    state, url = triton
    assert probe(url, tmp_path).returncode == 0
    assert state.tokens_asked == [f"/v2/models/{MODEL}/generate"]


def test_the_probes_own_token_is_no_progress_at_its_next_look(
    triton: tuple[StandInTriton, str], tmp_path: Path
) -> None:
    state, url = triton  # the token moved the counters; the engine died after it: the next look still asks
    for kind in ("readiness", "liveness"):
        state.engine_dead = False
        assert probe(url, tmp_path, kind).returncode == 0
        state.engine_dead = True
        assert probe(url, tmp_path, kind).returncode != 0, kind


def test_an_idle_dead_engine_is_not_ready(triton: tuple[StandInTriton, str], tmp_path: Path) -> None:
    state, url = triton
    state.engine_dead = True
    failed = probe(url, tmp_path)
    assert failed.returncode != 0
    assert failed.stderr.startswith(f"no token from {MODEL}: ")


def test_a_busy_engine_that_makes_progress_is_ready_without_a_token_queued_behind_its_load(
    triton: tuple[StandInTriton, str], tmp_path: Path
) -> None:
    state, url = triton
    state.running, state.waiting = 64, 40  # overloaded: a token would wait behind 104 requests
    for step in range(3):
        state.generation_tokens += 64
        state.prompt_tokens += 512 * (step % 2)
        assert probe(url, tmp_path).returncode == 0
    assert state.tokens_asked == []


def test_a_busy_engine_without_progress_since_the_last_probe_is_not_ready(
    triton: tuple[StandInTriton, str], tmp_path: Path
) -> None:
    state, url = triton
    state.running, state.generation_tokens = 3, 1000  # a dead engine's gauges keep their last values
    assert probe(url, tmp_path).returncode == 0  # the first look has nothing to compare with
    stuck = probe(url, tmp_path)
    assert stuck.returncode != 0
    assert stuck.stderr.strip() == f"{MODEL}: 3 requests running or waiting and no token since the last probe"
    assert state.tokens_asked == []


def test_counters_that_restarted_with_the_server_count_as_progress(
    triton: tuple[StandInTriton, str], tmp_path: Path
) -> None:
    state, url = triton
    state.running, state.generation_tokens = 3, 1000
    assert probe(url, tmp_path).returncode == 0
    state.generation_tokens = 12
    assert probe(url, tmp_path).returncode == 0


def test_another_models_load_is_not_this_ones(triton: tuple[StandInTriton, str], tmp_path: Path) -> None:
    state, url = triton  # llama-2 has 7 running; this model none: idle, asked a token
    assert probe(url, tmp_path).returncode == 0
    assert state.tokens_asked == [f"/v2/models/{MODEL}/generate"]


def test_without_the_scheduler_gauges_a_pods_first_look_asks_a_token(
    triton: tuple[StandInTriton, str], tmp_path: Path
) -> None:
    state, url = triton  # the first look comes before the pod takes traffic: nothing to queue behind
    state.gauges = False
    assert probe(url, tmp_path).returncode == 0
    assert len(state.tokens_asked) == 1


def test_without_the_gauges_a_saturated_engine_that_makes_progress_is_ready_and_alive_without_a_token(
    triton: tuple[StandInTriton, str], tmp_path: Path
) -> None:
    """The review's storm: absent gauges read as idle, each probe's token queued behind the real load past its
    timeout and every pod went unready, then was restarted, at the peak. Progress is judged first."""
    state, url = triton
    state.gauges = False
    state.generation_tokens = 1000
    for kind in ("readiness", "liveness"):
        assert probe(url, tmp_path, kind).returncode == 0  # first looks (readiness's asks its token)
    asked = len(state.tokens_asked)
    for _ in range(4):
        state.generation_tokens += 64
        assert probe(url, tmp_path, "readiness", idle_after_s=0).returncode == 0
        assert probe(url, tmp_path, "liveness").returncode == 0
    assert len(state.tokens_asked) == asked


def test_without_the_gauges_readiness_asks_a_token_only_once_the_counters_stood_still_a_while(
    triton: tuple[StandInTriton, str], tmp_path: Path
) -> None:
    state, url = triton
    state.gauges, state.generation_tokens = False, 1000
    assert probe(url, tmp_path, idle_after_s=30).returncode == 0  # first look: its token
    state.tokens_asked.clear()
    assert probe(url, tmp_path, idle_after_s=30).returncode == 0  # still for less than 30 s: no token, not judged
    assert state.tokens_asked == []
    state.engine_dead = True  # still long enough (the window, shortened to now)
    failed = probe(url, tmp_path, idle_after_s=0)
    assert failed.returncode != 0
    assert failed.stderr.startswith(f"no token from {MODEL}: ")
    assert len(state.tokens_asked) == 1


def test_without_the_gauges_liveness_asks_no_token_before_the_counters_stood_still_for_the_stall(
    triton: tuple[StandInTriton, str], tmp_path: Path
) -> None:
    """Without the gauges liveness cannot see a queue: its token waits until nothing moved for the engine's allowed
    stall (a busy engine moves its counters at every step), and its first look (the pod may already take traffic)
    asks none."""
    state, url = triton
    state.gauges, state.engine_dead, state.generation_tokens = False, True, 1000
    for _ in range(3):
        assert probe(url, tmp_path, "liveness", idle_after_s=60).returncode == 0
    assert state.tokens_asked == []


def test_without_the_gauges_liveness_fails_a_dead_engine_whose_counters_stood_still_for_the_stall(
    triton: tuple[StandInTriton, str], tmp_path: Path
) -> None:
    """The dead engine an image without the gauges used to leave running: out of traffic but never restarted."""
    state, url = triton
    state.gauges, state.generation_tokens = False, 1000
    assert probe(url, tmp_path, "liveness", idle_after_s=0).returncode == 0  # first look: no token
    assert probe(url, tmp_path, "liveness", idle_after_s=0).returncode == 0  # still (window shortened): alive
    state.engine_dead = True
    failed = probe(url, tmp_path, "liveness", idle_after_s=0)
    assert failed.returncode != 0
    assert failed.stderr.startswith(f"no token from {MODEL}: ")
    assert len(state.tokens_asked) == 2


def test_liveness_asks_a_token_of_an_engine_the_gauges_show_idle_and_fails_a_dead_one(
    triton: tuple[StandInTriton, str], tmp_path: Path
) -> None:
    state, url = triton  # idle and dead: unready, so no traffic would ever move its counters; only a restart helps
    state.generation_tokens = 1000
    assert probe(url, tmp_path, "liveness").returncode == 0
    state.engine_dead = True
    failed = probe(url, tmp_path, "liveness")
    assert failed.returncode != 0
    assert failed.stderr.startswith(f"no token from {MODEL}: ")
    assert len(state.tokens_asked) == 2


def test_liveness_of_a_busy_engine_judges_progress_alone(triton: tuple[StandInTriton, str], tmp_path: Path) -> None:
    state, url = triton
    state.running, state.waiting, state.generation_tokens = 64, 40, 1000
    assert probe(url, tmp_path, "liveness").returncode == 0
    state.generation_tokens += 1
    assert probe(url, tmp_path, "liveness").returncode == 0
    stuck = probe(url, tmp_path, "liveness")
    assert stuck.returncode != 0
    assert "no token since the last probe" in stuck.stderr
    assert state.tokens_asked == []


def test_an_idle_engine_whose_counters_restarted_is_asked_a_token(
    triton: tuple[StandInTriton, str], tmp_path: Path
) -> None:
    state, url = triton  # the restarted container's first look: its counters' fall is no proof of life
    state.generation_tokens = 1000
    assert probe(url, tmp_path).returncode == 0
    state.generation_tokens, state.engine_dead = 0, True
    assert probe(url, tmp_path).returncode != 0


@pytest.mark.parametrize("kind", ["readiness", "liveness"])
@pytest.mark.parametrize("engine_dead", [False, True])
def test_a_probe_whose_compile_cache_would_block_answers_as_without_one(
    kind: str, engine_dead: bool, triton: tuple[StandInTriton, str], tmp_path: Path
) -> None:
    """A stalled store never slows or fails a probe: the probes never touch it (the lease is renewed beside the
    server: ``tritonft.engines.vllm.compile_cache.renewing_lease``). Here the pod's lease is a FIFO, which blocks
    whoever opens it to write; the probe answers within its budget, with the verdict it gives without the cache."""
    import os

    from tritonft.engines.vllm.compile_cache import LEASE

    state, url = triton
    state.engine_dead = engine_dead
    root = tmp_path / "compile-cache" / "llama" / "0123456789abcdef"
    root.mkdir(parents=True)
    os.mkfifo(root / LEASE)
    verdicts = []
    for env, state_dir in (({}, "plain"), ({"VLLM_CACHE_ROOT": str(root)}, "cached")):
        (tmp_path / state_dir).mkdir()
        command = health.generate_command(
            MODEL,
            url=url,
            timeout_s=5,
            metrics_url=f"{url}/metrics",
            state=str(tmp_path / state_dir / kind),
            probe=kind,
        )
        ran = subprocess.run(
            command, check=False, env={**os.environ, **env}, capture_output=True, text=True, timeout=health.TIMEOUT_S
        )
        verdicts.append((ran.returncode, ran.stderr))
    assert verdicts[0] == verdicts[1]
    assert (verdicts[0][0] != 0) == engine_dead


def test_a_probe_is_readiness_or_liveness() -> None:
    with pytest.raises(ValueError, match="readiness or liveness"):
        health.generate_command(MODEL, probe="startup")


def test_without_triton_metrics_the_pod_is_not_ready(tmp_path: Path) -> None:
    from tritonft.local_triton import free_port

    failed = probe(f"http://127.0.0.1:{free_port()}", tmp_path)
    assert failed.returncode != 0
    assert failed.stderr.startswith(f"no metrics from Triton for {MODEL}: ")


def as_kubelet_runs(probe: dict[str, Any], url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``probe``'s command against the stand-in, its state file kept under ``tmp_path`` by the same name."""
    *_, state, kind, quiet = probe["exec"]["command"]
    command = health.generate_command(
        MODEL,
        url=url,
        timeout_s=5,
        metrics_url=f"{url}/metrics",
        state=str(tmp_path / state.rsplit("/", 1)[1]),
        probe=kind,
        idle_after_s=float(quiet),
    )
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=health.TIMEOUT_S)


def liveness(url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return as_kubelet_runs(health.liveness_probe(MODEL, 60), url, tmp_path)


def readiness(url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return as_kubelet_runs(health.readiness_probe(MODEL), url, tmp_path)


def test_liveness_judges_progress_since_its_own_last_look_not_readinesss(
    triton: tuple[StandInTriton, str], tmp_path: Path
) -> None:
    """Readiness probes every period too: had the two one reading, a readiness probe just after the engine's last
    token would leave liveness comparing equal counters, and a working engine would be restarted."""
    state, url = triton
    state.running, state.generation_tokens = 3, 1000
    assert liveness(url, tmp_path).returncode == 0  # first look
    state.generation_tokens += 64
    assert readiness(url, tmp_path).returncode == 0  # readiness reads the new count first
    assert liveness(url, tmp_path).returncode == 0, "the engine generated 64 tokens since liveness last looked"
    stuck = liveness(url, tmp_path)
    assert stuck.returncode != 0
    assert "no token since the last probe" in stuck.stderr


def test_liveness_restarts_an_engine_stalled_for_the_first_token_deadline_in_whole_periods() -> None:
    assert (health.liveness_failures(60), health.liveness_failures(61), health.liveness_failures(300)) == (6, 7, 30)
    probe = health.liveness_probe(MODEL, 60)
    assert (probe["periodSeconds"], probe["timeoutSeconds"], probe["failureThreshold"]) == (10, 20, 6)
    assert health.restarted_within_s(60) == 6 * 20 + 10


def test_without_the_gauges_liveness_waits_the_stall_before_its_token_and_restarts_later() -> None:
    command = health.liveness_probe(MODEL, 60)["exec"]["command"]
    assert command[-2:] == ["liveness", "60"]
    assert health.restarted_within_s(60, gauges=False) == 60 + 6 * 20 + 10


def test_liveness_always_outlasts_readiness_so_a_stalled_pod_leaves_traffic_first() -> None:
    assert health.liveness_failures(1) == health.liveness_failures(30) == health.FAILURES + 1
    assert health.liveness_failures(1) * health.PERIOD_S > health.FAILURES * health.PERIOD_S


def test_an_engine_without_an_allowed_stall_is_refused() -> None:
    with pytest.raises(ValueError, match="allowed stall must be positive"):
        health.liveness_failures(0)


def drain(url: str, longest_s: float) -> tuple[subprocess.Popen[str], list[str]]:
    command = health.drain_command(MODEL, 0, longest_s, metrics_url=f"{url}/metrics", idle_grace_s=0, poll_s=0.05)
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), command


def test_a_draining_pod_leaves_once_its_engine_has_nothing_left_not_after_the_longest_request(
    triton: tuple[StandInTriton, str],
) -> None:
    import time

    state, url = triton
    state.running, state.waiting = 2, 1
    process, _ = drain(url, longest_s=60)
    time.sleep(0.3)
    assert process.poll() is None, "it left while requests were running"
    state.running, state.waiting = 0, 0
    assert process.wait(timeout=20) == 0  # long before the 60 s bound


def test_without_the_gauges_a_draining_pod_waits_its_longest_request(triton: tuple[StandInTriton, str]) -> None:
    import time

    state, url = triton
    state.gauges = False
    started = time.monotonic()
    process, _ = drain(url, longest_s=0.5)
    assert process.wait(timeout=20) == 0
    assert time.monotonic() - started >= 0.5

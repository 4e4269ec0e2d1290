"""A vLLM pod's readiness: its engine makes progress, judged without queueing behind its load (pure).

Triton's readiness stays true when vLLM's engine is dead or hung: NVIDIA's backend checks the engine only with
``ENABLE_VLLM_HEALTH_CHECK``, only when a request arrives, and answers by unloading the model, which
``--model-control-mode=none`` (the stack's) refuses (``vllm_backend`` ``src/model.py:438-440``, ``:604-626``). So the
pod's readinessProbe asks the engine itself, judged in this order on what Triton's ``/metrics`` says of the
model (vLLM's scheduler gauges, which the server image adds: ``images/triton-vllm/scheduler_gauges.py``):

- **progress first**: whenever the engine's token counters (``vllm:prompt_tokens_total`` +
  ``vllm:generation_tokens_total``) moved since the probe's previous reading (kept in a file under ``/tmp``), it
  passes and sends nothing. A token request would queue behind the load instead: past :data:`TIMEOUT_S` of time to
  first token under overload, every pod of the model would go unready at once and the gateway would have nowhere to
  send (the cascade a one-token probe alone has).
- **busy without progress** (the gauges show requests running or waiting): it fails. A dead engine's counters stop
  (its gauges keep their last values), as do a hung one's: three probes without progress and the pod is unready.
- **known idle** (the gauges show nothing running or waiting): one token through Triton's HTTP ``generate`` (the
  server's own loopback, the inference API no restriction covers), which nothing queues ahead of: a dead engine
  answers an error and a hung one nothing within :data:`TIMEOUT_S`.
- **unknown** (the gauges are absent: an image whose patch did not apply, the ``VllmSchedulerGaugesAbsent`` alert):
  an absent gauge is never read as idle. Readiness sends its token only at its first look (before the pod takes
  traffic) or once the counters have stood still for :data:`IDLE_AFTER_S`; until then it passes.

After :data:`FAILURES` failed probes the kubelet marks the pod unready; its Endpoints drop it and the gateway,
resolving the pods' headless Service, stops sending to it (``tritonft.gateway.triton``).

The livenessProbe judges on its own reading (:func:`liveness_probe`) and never on a token that could queue: progress
passes, busy without progress fails, known idle asks the token (an idle dead engine, unready, gets no traffic that
would move its counters: only the token finds it), and unknown (no gauges) asks it only once the counters have stood
still for the engine's whole allowed stall (no queue it cannot see is being worked on then: a busy engine moves
them at every step, and one that has work but produced nothing for that long is the stall liveness is for), else
passes. So an engine that stays dead or hung is restarted, not only taken out of traffic, with or without the
gauges: after :func:`liveness_failures` failed probes in a row (no token for the engine's allowed stall while it has
work, or that many one-token requests unanswered while idle or still) the kubelet restarts the container.
The allowed stall is the model's first-token deadline (the gateway's ``--deadline``, which
covers a request's wait for the engine and its prompt's prefill): an engine with work that produces no token at all
for that long fails every request it holds anyway, while a busy engine produces tokens at every step and is never
restarted for being slow. It is always longer than readiness's window, so a stalled pod leaves traffic first. The
startupProbe covers the model's load: neither probe runs before it has passed.
"""

from __future__ import annotations

import math
from typing import Any

PERIOD_S = 10
"""How often the kubelet asks."""
TIMEOUT_S = 20
"""How long one probe may take: the idle probe's token (nothing queued ahead of it) or the metrics' scrape."""
FAILURES = 3
"""Consecutive failures before the pod is unready (one slow answer, or one step longer than a period, does not take a
pod out)."""
UNREADY_WITHIN_S = FAILURES * PERIOD_S + TIMEOUT_S
"""The longest a dead or hung engine's pod stays ready: three periods and the last probe's timeout (50 s; without
the scheduler gauges, :data:`IDLE_AFTER_S` less one period more: 60 s)."""
HTTP_URL = "http://127.0.0.1:8000"
"""Triton's HTTP endpoint in the pod (``generate``)."""
METRICS_URL = "http://127.0.0.1:8002/metrics"
"""Triton's metrics endpoint in the pod (vLLM's families, ``REPORT_CUSTOM_METRICS``)."""
IDLE_AFTER_S = 2 * PERIOD_S
"""Without the scheduler gauges (running and waiting unknown), how long the token counters must have stood still
before readiness sends its token: a busy engine produces tokens at every step (milliseconds to a second), so 20 s
without one is an idle engine or a stalled one, never one whose queue the token would wait behind while it works."""
STATE_DIR = "/tmp"
"""Where the probe keeps the counters' last value (the pod's ``/tmp``, an emptyDir: gone with the pod)."""

SCRIPT = """\
import json, os, sys, time, urllib.request
url, metrics_url, model, timeout, state = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
mode, quiet = sys.argv[6], float(sys.argv[7])
label = 'model="%s"' % model

def families():
    try:
        with urllib.request.urlopen(metrics_url, timeout=timeout) as answer:
            text = answer.read().decode()
    except Exception as exc:
        sys.exit(f"no metrics from Triton for {model}: {exc}")
    found = {}
    for line in text.splitlines():
        if line.startswith("#") or label not in line:
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        try:
            found[name] = found.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
        except (IndexError, ValueError):
            continue
    return found

def counted(found):
    counters = [found[n] for n in ("vllm:prompt_tokens_total", "vllm:generation_tokens_total") if n in found]
    return sum(counters) if counters else None

def token():
    sampling = json.dumps({"max_tokens": 1})
    body = {"text_input": "ready", "sampling_parameters": sampling, "exclude_input_in_output": True}
    request = urllib.request.Request(
        f"{url}/v2/models/{model}/generate", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            text = json.load(answer).get("text_output")
    except Exception as exc:
        sys.exit(f"no token from {model}: {exc}")
    if not isinstance(text, str):
        sys.exit(f"{model} answered no text_output")

seen = families()
gauges = [seen[n] for n in ("vllm:num_requests_running", "vllm:num_requests_waiting") if n in seen]
progress = counted(seen)
queued = sum(gauges) if len(gauges) == 2 else None  # None: unknown (the image's gauges are absent)
now = time.time()
try:
    with open(state) as kept:
        reading = json.load(kept)
    before, since = reading["tokens"], float(reading["moved"])
except (OSError, ValueError, KeyError, TypeError):
    reading = before = since = None
restarted = progress is not None and before is not None and progress < before  # the counters restart with Triton
first = reading is None or restarted  # nothing to compare with
moved = not first and progress is not None and progress != before
if first or moved:
    since = now

def keep(tokens):
    with open(state + ".new", "w") as keeping:
        json.dump({"tokens": tokens, "moved": since}, keeping)
    os.replace(state + ".new", state)

keep(progress)
if moved:  # the engine produced tokens since the last look: alive, however long its queue (no token sent)
    sys.exit(0)
if queued is not None and queued > 0:
    if first:  # nothing to compare with yet
        sys.exit(0)
    sys.exit(f"{model}: {queued:g} requests running or waiting and no token since the last probe")
if queued is None:  # running and waiting unknown: a token could queue behind load the probe cannot see
    if first and mode == "liveness":
        sys.exit(0)  # liveness's first look may come after the pod took traffic: nothing to compare with yet
    if not first and now - since < quiet:
        sys.exit(0)  # tokens a moment ago: not still long enough to be sure a token would not queue
token()  # idle: nothing running or waiting (or, without the gauges, no token for `quiet` s)
try:  # the token's own count is no progress at the next look (a dead engine's would pass it once)
    keep(counted(families()))
except SystemExit:
    pass
"""
"""The probe (``argv``: url, metrics url, model, timeout, state file, ``readiness`` or ``liveness``, idle-after
seconds): exits 0 when ``model``'s engine made progress since the probe's last reading, or, without the gauges,
moved less than ``idle-after`` s ago, or, known idle (or, without the gauges, still for ``idle-after`` s), generated
a token at ``url`` within ``timeout`` s; else non-zero naming why. It never touches the store (the compile cache's
lease is renewed beside the server: :func:`tritonft.engines.vllm.compile_cache.renewing_lease`, so a stalled store
never slows or fails a probe). Standard library only (the image's
``python3``)."""


def state_file(model: str, probe: str = "readiness") -> str:
    """Where ``probe`` (``readiness`` or ``liveness``) of ``model`` keeps the counters' last value: each its own, so
    one probe's reading never shortens the other's window."""
    return f"{STATE_DIR}/tritonft-{probe}-{model}"


def generate_command(
    model: str,
    url: str = HTTP_URL,
    timeout_s: float = TIMEOUT_S - 1,
    *,
    metrics_url: str = METRICS_URL,
    state: str | None = None,
    probe: str = "readiness",
    idle_after_s: float | None = None,
) -> list[str]:
    """``probe``'s command (``readiness`` or ``liveness``) for ``model`` (its client timeout one second under the
    kubelet's), its reading kept in ``state`` (default :func:`state_file`)."""
    if probe not in ("readiness", "liveness"):
        raise ValueError(f"a vLLM pod's probe is readiness or liveness (got {probe!r})")
    quiet = IDLE_AFTER_S if idle_after_s is None else idle_after_s
    return [
        "python3",
        "-c",
        SCRIPT,
        url,
        metrics_url,
        model,
        f"{timeout_s:g}",
        state or state_file(model, probe),
        probe,
        f"{quiet:g}",
    ]


def readiness_probe(model: str) -> dict[str, Any]:
    """The Triton container's readinessProbe for a vLLM model."""
    return {
        "exec": {"command": generate_command(model)},
        "periodSeconds": PERIOD_S,
        "timeoutSeconds": TIMEOUT_S,
        "failureThreshold": FAILURES,
    }


def liveness_failures(stall_s: float) -> int:
    """Failed liveness probes in a row before the kubelet restarts the engine's container: the allowed stall
    (``stall_s``, the model's first-token deadline) in whole periods, and always more than readiness's
    :data:`FAILURES` (a stalled pod is taken out of traffic before it is restarted). 60 s: 6."""
    if stall_s <= 0:
        raise ValueError(f"the engine's allowed stall must be positive (got {stall_s})")
    return max(math.ceil(stall_s / PERIOD_S), FAILURES + 1)


def restarted_within_s(stall_s: float, *, gauges: bool = True) -> int:
    """The longest a dead or hung engine's container runs on: :func:`liveness_failures` probes, each up to its
    timeout apart (an unanswered token takes the whole :data:`TIMEOUT_S`), after the period that found the last
    progress. 60 s: 6 x 20 + 10 = 130 s. Without the scheduler gauges the first token waits for the counters to
    have stood still ``stall_s``: 60 s more, 190 s."""
    still = 0 if gauges else math.ceil(stall_s)
    return liveness_failures(stall_s) * max(PERIOD_S, TIMEOUT_S) + PERIOD_S + still


def liveness_probe(model: str, stall_s: float) -> dict[str, Any]:
    """The Triton container's livenessProbe for a vLLM model: judged on progress on its own reading (:func:`state_file`
    ``liveness``), a token only when the gauges show the engine idle (without them, once the counters stood still
    ``stall_s``), failing :func:`liveness_failures` times in a row before a restart."""
    return {
        "exec": {"command": generate_command(model, probe="liveness", idle_after_s=stall_s)},
        "periodSeconds": PERIOD_S,
        "timeoutSeconds": TIMEOUT_S,
        "failureThreshold": liveness_failures(stall_s),
    }


IDLE_GRACE_S = 2
"""After the engine has nothing running or waiting: time for Triton to send the last responses it holds."""
DRAIN_POLL_S = 2
DRAIN_OVERRUN_S = 5 + IDLE_GRACE_S
"""How far the drain may run past its bound: a last read of the metrics (5 s timeout), then the idle grace."""

DRAIN_SCRIPT = """\
import sys, time, urllib.request
metrics_url, model, propagation, longest = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
grace, poll = float(sys.argv[5]), float(sys.argv[6])
label = 'model="%s"' % model
time.sleep(propagation)
end = time.monotonic() + longest

def queued():
    try:
        with urllib.request.urlopen(metrics_url, timeout=5) as answer:
            text = answer.read().decode()
    except Exception:
        return None
    found = None
    for line in text.splitlines():
        if line.split("{", 1)[0] in ("vllm:num_requests_running", "vllm:num_requests_waiting") and label in line:
            try:
                found = (found or 0.0) + float(line.rsplit(" ", 1)[1])
            except (IndexError, ValueError):
                return None
    return found

while time.monotonic() < end:
    if queued() == 0:
        time.sleep(grace)
        break
    time.sleep(max(min(poll, end - time.monotonic()), 0))
"""
"""A vLLM pod's ``preStop``: wait until no client can still pick the pod (``propagation`` s), then until the engine has
nothing running or waiting for ``model`` (vLLM's scheduler gauges on Triton's ``/metrics``) and ``grace`` s more, or
until ``longest`` s (its longest request) have passed, whichever comes first. Without the gauges (or the metrics) it
waits the whole ``longest``, as a plain ``sleep`` would. A long stream's deadline (many minutes) is then the bound, not
what every replaced or scaled-in pod waits: an idle pod leaves within seconds of the propagation and frees its GPU."""


def drain_command(
    model: str,
    propagation_s: float,
    longest_s: float,
    *,
    metrics_url: str = METRICS_URL,
    idle_grace_s: float = IDLE_GRACE_S,
    poll_s: float = DRAIN_POLL_S,
) -> list[str]:
    """The ``preStop`` command of ``model``'s Triton container (:data:`DRAIN_SCRIPT`)."""
    return [
        "python3",
        "-c",
        DRAIN_SCRIPT,
        metrics_url,
        model,
        f"{propagation_s:g}",
        f"{longest_s:g}",
        f"{idle_grace_s:g}",
        f"{poll_s:g}",
    ]

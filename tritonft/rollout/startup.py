"""Where a Triton replica's start-up seconds went, from what Kubernetes and Triton report (pure: plain API dicts and
log text in, numbers out; no calls).

A pod's start is split into consecutive stages whose seconds add up to its whole start (creation → ``Ready``):

=============  =============================================================================================
``scheduled``  created → ``PodScheduled=True`` (waiting for a node; includes a node the autoscaler added)
``init``       scheduled → ``Initialized=True`` (init containers: FT's GEMM tuning, with its image's pull)
``started``    initialized → the server container's ``state.running.startedAt`` (mostly the server image's pull)
``ready``      started → ``Ready=True`` (Triton loads its models, then the readiness probe passes)
=============  =============================================================================================

and, inside those, what the API says of them when it does: ``node_provisioned`` (from cluster-autoscaler's
``TriggeredScaleUp`` or Karpenter's ``Nominated`` event to the pod being scheduled), ``image_pull`` (each
``Pulling`` → ``Pulled`` event pair of the pod; an image already on the node costs none), ``gemm_tuning`` (the init
containers' own ``startedAt`` → ``finishedAt``). Triton's own log adds each model's load (``loading: m:1`` →
``successfully loaded 'm'``) and the server's ``up`` (its first log line → ``Started HTTPService``).

Condition times are the API's ``lastTransitionTime`` (one-second resolution); a pod whose server restarted reports
its latest start (``restarts`` says how many).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

STAGES = ("scheduled", "init", "started", "ready")
"""The consecutive stages of a pod's start, in order; they add up to ``total``."""
DETAILS = ("node_provisioned", "image_pull", "gemm_tuning")
"""What the API says of the time inside those stages, when it does."""
SCALE_UP_EVENTS = ("TriggeredScaleUp", "Nominated")
"""A node autoscaler's word that it is adding a node for the pod (cluster-autoscaler, Karpenter/EKS Auto Mode)."""
SERVER_CONTAINER = "triton"


@dataclass(frozen=True)
class PodStartup:
    """One pod's start-up budget: seconds per stage (None: not reached yet, or the API does not say)."""

    pod: str
    node: str
    stages: Mapping[str, float | None]
    """``STAGES`` in order."""
    details: Mapping[str, float | None]
    """``DETAILS``: the parts of the stages the API accounts for (None: not seen)."""
    restarts: int = 0
    models: Mapping[str, float] = field(default_factory=dict)
    """Triton's own load time per model (from its log), when the log was read."""
    server_up_s: float | None = None
    """Triton's start → its HTTP service listening (from its log), when the log was read."""

    @property
    def total(self) -> float | None:
        """Creation → Ready; None while the pod is not ready."""
        values = [self.stages.get(s) for s in STAGES]
        return None if any(v is None for v in values) else round(sum(v for v in values if v is not None), 3)

    def as_output(self) -> dict[str, Any]:
        """Plain JSON for a stack output or ``--json``: the stages, details and total in seconds."""
        out: dict[str, Any] = {"node": self.node, "restarts": self.restarts, "total": self.total}
        out.update({k: v for k, v in self.stages.items()})
        out.update({k: v for k, v in self.details.items() if v is not None})
        if self.server_up_s is not None:
            out["server_up"] = self.server_up_s
        if self.models:
            out["models"] = dict(self.models)
        return out


def timestamp(value: str) -> datetime:
    """An API timestamp (RFC 3339, ``Z`` or an offset, with or without fractions)."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round(max(0.0, (end - start).total_seconds()), 3)


def condition_time(pod: Mapping[str, Any], kind: str) -> datetime | None:
    """When the pod's condition ``kind`` last became True (None: it is not True)."""
    for c in pod.get("status", {}).get("conditions", []) or []:
        if c.get("type") == kind and c.get("status") == "True" and c.get("lastTransitionTime"):
            return timestamp(str(c["lastTransitionTime"]))
    return None


def _server_status(pod: Mapping[str, Any], container: str) -> Mapping[str, Any]:
    statuses = pod.get("status", {}).get("containerStatuses", []) or []
    for s in statuses:
        if s.get("name") == container:
            return dict(s)
    return dict(statuses[0]) if statuses else {}


def server_started(pod: Mapping[str, Any], container: str = SERVER_CONTAINER) -> datetime | None:
    """The server container's ``state.running.startedAt`` (its latest start)."""
    running = _server_status(pod, container).get("state", {}).get("running") or {}
    return timestamp(str(running["startedAt"])) if running.get("startedAt") else None


def event_time(event: Mapping[str, Any]) -> datetime | None:
    """When an event happened: ``eventTime`` (events.k8s.io), else ``firstTimestamp``, else its creation."""
    for key in ("eventTime", "firstTimestamp"):
        if event.get(key):
            return timestamp(str(event[key]))
    created = event.get("metadata", {}).get("creationTimestamp")
    return timestamp(str(created)) if created else None


def pod_events(events: Iterable[Mapping[str, Any]], pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The events about ``pod`` (by uid when the event carries one, else by name), oldest first."""
    meta = pod["metadata"]
    mine = []
    for e in events:
        about = e.get("involvedObject") or e.get("regarding") or {}
        if about.get("kind") != "Pod" or about.get("name") != meta["name"]:
            continue
        if about.get("uid") and meta.get("uid") and about["uid"] != meta["uid"]:
            continue
        mine.append(e)
    return sorted(mine, key=lambda e: event_time(e) or datetime.max.replace(tzinfo=UTC))


def node_provisioned(events: Sequence[Mapping[str, Any]], scheduled: datetime | None) -> float | None:
    """From the first node-autoscaler event on the pod to its scheduling (None: no node was added for it)."""
    times = [t for e in events if e.get("reason") in SCALE_UP_EVENTS and (t := event_time(e)) is not None]
    return _seconds(min(times), scheduled) if times else None


def image_pull(events: Sequence[Mapping[str, Any]]) -> float | None:
    """The pod's image pulls: each container's ``Pulling`` → ``Pulled``, added up; 0 when every image was already
    on the node (``Pulled`` alone); None when the API shows no pull events (a kubelet that emits none)."""
    pulling: dict[str, datetime] = {}
    total, seen = 0.0, False
    for e in events:
        where = str((e.get("involvedObject") or e.get("regarding") or {}).get("fieldPath", ""))
        when = event_time(e)
        if e.get("reason") == "Pulling" and when is not None:
            pulling.setdefault(where, when)
        elif e.get("reason") == "Pulled":
            seen = True
            began = pulling.pop(where, None)
            total += _seconds(began, when) or 0.0
    return round(total, 3) if seen else None


def gemm_tuning(pod: Mapping[str, Any]) -> float | None:
    """The init containers' run time (``terminated.startedAt`` → ``finishedAt``, added up); None: none finished."""
    spent, seen = 0.0, False
    for s in pod.get("status", {}).get("initContainerStatuses", []) or []:
        done = s.get("state", {}).get("terminated") or {}
        if done.get("startedAt") and done.get("finishedAt"):
            seen = True
            spent += _seconds(timestamp(str(done["startedAt"])), timestamp(str(done["finishedAt"]))) or 0.0
    return round(spent, 3) if seen else None


def pod_startup(
    pod: Mapping[str, Any], events: Iterable[Mapping[str, Any]], *, container: str = SERVER_CONTAINER
) -> PodStartup:
    """``pod``'s start-up budget from its conditions, container statuses and the namespace's ``events``."""
    meta = pod["metadata"]
    created = timestamp(str(meta["creationTimestamp"]))
    scheduled = condition_time(pod, "PodScheduled")
    initialized = condition_time(pod, "Initialized")
    started = server_started(pod, container)
    ready = condition_time(pod, "Ready")
    if ready is not None and started is not None and ready < started:
        ready = None  # the Ready=True seen is from before the server's latest restart
    mine = pod_events(events, pod)
    stages = {
        "scheduled": _seconds(created, scheduled),
        "init": _seconds(scheduled, initialized),
        "started": _seconds(initialized, started),
        "ready": _seconds(started, ready),
    }
    details = {
        "node_provisioned": node_provisioned(mine, scheduled),
        "image_pull": image_pull(mine),
        "gemm_tuning": gemm_tuning(pod),
    }
    restarts = int(_server_status(pod, container).get("restartCount", 0) or 0)
    return PodStartup(str(meta["name"]), str(pod.get("spec", {}).get("nodeName") or "-"), stages, details, restarts)


# --- Triton's own log -------------------------------------------------------------------------------------------
_GLOG = re.compile(r"^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+) +\d+ [^\]]*\] (.*)$")
_ISO = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?) [IWEF] \d+ [^\]]*\] (.*)$")
_LOADING = re.compile(r"loading: ([^:\"]+):\d+")
_LOADED = re.compile(r"successfully loaded '([^']+)'")
_HTTP_UP = "Started HTTPService"


@dataclass(frozen=True)
class TritonLoad:
    """What Triton's log says of its start: seconds per model load, and its start → HTTP service listening."""

    models: Mapping[str, float]
    server_up_s: float | None


def _log_lines(text: str) -> list[tuple[float, str]]:
    """(seconds since the first timed line, message) for each line Triton timed (glog's ``I1126 14:12:32.379304``
    has no year: the times are taken within one run, and a run past midnight wraps correctly)."""
    out: list[tuple[float, str]] = []
    first: datetime | None = None
    previous = 0.0
    for raw in text.splitlines():
        line = raw.strip()
        if m := _ISO.match(line):
            stamp = timestamp(m.group(1))
            when = stamp.astimezone(UTC).replace(tzinfo=None) if stamp.tzinfo else stamp
            message = m.group(2)
        elif m := _GLOG.match(line):
            month, day, hh, mm, ss, frac = m.groups()[:6]
            when = datetime(2000, int(month), int(day), int(hh), int(mm), int(ss), int(frac.ljust(6, "0")[:6]))
            message = m.group(7)
        else:
            continue
        if first is None:
            first = when
        at = (when - first).total_seconds()
        while at < previous - 1:  # glog's year-less dates: a run across New Year
            when += timedelta(days=366)
            at = (when - first).total_seconds()
        previous = at
        out.append((at, message.strip().strip('"')))
    return out


def triton_load(log_text: str) -> TritonLoad:
    """Each model's load time (``loading: m:v`` → ``successfully loaded 'm'``, its latest load) and the server's
    start → ``Started HTTPService``, from a ``tritonserver`` log (default glog lines or ``--log-format ISO8601``).
    A model that never finished loading is absent."""
    began: dict[str, float] = {}
    loads: dict[str, float] = {}
    up: float | None = None
    for at, message in _log_lines(log_text):
        if m := _LOADING.search(message):
            began[m.group(1)] = at
        elif m := _LOADED.search(message):
            name = m.group(1)
            if name in began:
                loads[name] = round(at - began.pop(name), 3)
        elif _HTTP_UP in message and up is None:
            up = round(at, 3)
    return TritonLoad(loads, up)


def with_triton(startup: PodStartup, load: TritonLoad) -> PodStartup:
    """``startup`` with what the server's own log says."""
    return PodStartup(
        startup.pod, startup.node, startup.stages, startup.details, startup.restarts, load.models, load.server_up_s
    )


# --- the report -------------------------------------------------------------------------------------------------
def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def render_table(startups: Sequence[PodStartup]) -> str:
    """One row per pod: the stages, the details and the total, in seconds (``-``: not reached / not reported);
    then, per pod whose log was read, Triton's own load time per model."""
    head = ["pod", "node", *STAGES, "total", *DETAILS, "restarts"]
    rows = [
        [
            s.pod,
            s.node,
            *(_cell(s.stages.get(k)) for k in STAGES),
            _cell(s.total),
            *(_cell(s.details.get(k)) for k in DETAILS),
            str(s.restarts),
        ]
        for s in startups
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [head, *rows]]
    for s in startups:
        if s.models or s.server_up_s is not None:
            loads = ", ".join(f"{m} {v:.1f}" for m, v in sorted(s.models.items()))
            lines.append(f"{s.pod}: Triton up {_cell(s.server_up_s)} s; model loads (s): {loads or '-'}")
    return "\n".join(lines)


def slowest_stage(startup: PodStartup) -> str | None:
    """The stage that took longest (where to look first), None while no stage has a figure."""
    known = [(v, k) for k, v in startup.stages.items() if v is not None]
    return max(known)[1] if known else None

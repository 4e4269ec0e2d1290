"""The judge Job's container, run on this machine: its command and environment exactly as the plan's in-cluster
judge declares them (``components.serving.judge_job``), the candidate's address being the one thing changed (the
Job asks the candidate's Service; here, the real server standing for its pods). Its exit code and its termination
message are the verdict the in-cluster judge reads from the Job (``components.probe.in_cluster``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components.probe.in_cluster import JudgeOutcome
from tritonft.probe.in_cluster import CONFIG_ENV


def run_judge_container(job: Mapping[str, Any], endpoint: str, workdir: Path) -> JudgeOutcome:
    """Run the Job's only container's command with its environment, its probe asking ``endpoint``."""
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    env[CONFIG_ENV] = json.dumps({**json.loads(env[CONFIG_ENV]), "endpoint": endpoint})
    env["HOME"] = str(workdir)  # the pod's /tmp
    message = workdir / "termination-log"  # the pod's /dev/termination-log
    executable = Path(sys.executable).parent / container["command"][0]
    done = subprocess.run(
        [str(executable), *container["command"][1:], "--termination-log", str(message)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    text = message.read_text() if message.exists() else done.stderr[-4096:]
    return JudgeOutcome(done.returncode == 0, text)

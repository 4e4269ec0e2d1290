"""Prod's paging, checked by Alertmanager's own ``amtool`` (built from the Go module proxy by
``scripts/setup/amtool.sh``) on the configuration the plan renders from ``stacks/Pulumi.prod.yaml``: the config
loads, a critical alert reaches the on-call receiver, a warning the ticket receiver, Watchdog the dead-man's switch."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from components import args
from components.platform.aws import charts
from components.settings.stack_file import settings_from_stack_file
from tests import built_tools

REPO = Path(__file__).resolve().parents[4]


pytestmark = pytest.mark.built_tool("amtool")


@pytest.fixture(scope="module")
def amtool() -> str:
    return built_tools.tool_path("amtool")


@pytest.fixture(scope="module")
def prod_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    platform = args.aws_platform_args(settings_from_stack_file(REPO, "prod", ("hfToken",)))
    path = tmp_path_factory.mktemp("alertmanager") / "alertmanager.yaml"
    path.write_text(yaml.safe_dump(charts.alertmanager_config(platform.alert_receivers, platform.alert_routing)))
    return path


def run(amtool: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([amtool, *argv], capture_output=True, text=True, timeout=60, check=False)


def test_alertmanager_accepts_prods_rendered_config(amtool: str, prod_config: Path) -> None:
    result = run(amtool, "check-config", str(prod_config))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
    assert "4 receivers" in result.stdout  # null, oncall, tickets, deadmansswitch


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        (["alertname=TritonInferenceFailures", "severity=critical", "namespace=triton"], "oncall"),
        (["alertname=GatewayServerErrors", "severity=critical", "namespace=triton"], "oncall"),
        (["alertname=TritonQueueSaturated", "severity=warning", "namespace=triton"], "tickets"),
        (["alertname=KubePodCrashLooping", "namespace=triton"], "tickets"),
        (["alertname=Watchdog", "severity=none"], "deadmansswitch"),
        (["alertname=InfoInhibitor", "severity=none"], "null"),
    ],
)
def test_prods_alerts_reach_their_receiver(amtool: str, prod_config: Path, labels: list[str], receiver: str) -> None:
    result = run(
        amtool, "config", "routes", "test", f"--config.file={prod_config}", f"--verify.receivers={receiver}", *labels
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == receiver

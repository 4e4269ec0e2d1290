"""Where alerts go, as the settings decide it: prod refuses to page nobody and to run without a dead-man's switch,
receivers read their keys from Secret files (plain-text keys only in a secret value), routes name real receivers."""

from __future__ import annotations

from typing import Any

from components import args
from components.settings.alerting import alert_routing, credential_secrets
from tests.components.settings.test_eks_settings import KEYS, MONITORED, PAGING, load
from tests.components.settings.test_validation import aws_stack, problems_of

PAGER = {"name": "oncall", "pagerduty_configs": [{"routing_key_file": f"{KEYS}/pagerduty"}]}
HEARTBEAT = {"name": "heartbeat", "webhook_configs": [{"url_file": f"{KEYS}/heartbeat"}]}
TICKETS = {"name": "tickets", "slack_configs": [{"api_url_file": "/etc/alertmanager/secrets/slack/url"}]}


def prod(**overrides: Any) -> dict[str, Any]:
    return aws_stack(environment="prod", protectStorage=True, addons=MONITORED, **overrides)


def test_prod_without_receivers_is_refused_not_warned() -> None:
    problems = problems_of(prod())
    assert [p for p in problems if p.startswith("alertReceivers:")] == [
        "alertReceivers: prod pages nobody without one; give the on-call receiver (PagerDuty, Opsgenie, ...) with "
        "its key in a Secret file, see docs/day2.md#paging"
    ]


def test_prod_without_a_dead_mans_switch_is_refused() -> None:
    (problem,) = problems_of(prod(alertReceivers=[PAGER]))
    assert problem.startswith("alertRouting.watchdog: prod needs a dead-man's switch")


def test_prod_with_a_pager_and_a_dead_mans_switch_loads() -> None:
    platform = args.aws_platform_args(load(prod() | PAGING))
    assert platform.alert_routing == {"critical": "oncall", "warning": "oncall", "watchdog": "heartbeat"}


def test_staging_without_receivers_is_only_warned_about() -> None:
    settings = load(aws_stack(environment="staging", addons=MONITORED))
    assert any(w.startswith("alertReceivers: none") for w in settings.warnings)


def test_a_route_to_a_receiver_that_does_not_exist_is_refused() -> None:
    problems = problems_of(prod(alertReceivers=[PAGER, HEARTBEAT], alertRouting={"watchdog": "deadman"}))
    assert "alertRouting.watchdog: no receiver named 'deadman'; the receivers are oncall, heartbeat" in problems


def test_a_receiver_no_route_names_is_refused() -> None:
    (problem,) = problems_of(
        prod(alertReceivers=[PAGER, HEARTBEAT, TICKETS], alertRouting={"critical": "oncall", "watchdog": "heartbeat"})
    )
    assert problem == (
        "alertReceivers: tickets would get no alert; name each in alertRouting (critical, warning, watchdog)"
    )


def test_an_unknown_route_is_refused() -> None:
    (problem,) = problems_of(prod(alertReceivers=[PAGER], alertRouting={"page": "oncall"}))
    assert problem.startswith("alertRouting: unknown route 'page'; the routes are critical, warning, watchdog")


def test_a_credential_file_outside_the_mounted_secrets_is_refused() -> None:
    receiver = {"name": "oncall", "pagerduty_configs": [{"routing_key_file": "/tmp/key"}]}
    (problem,) = problems_of(aws_stack(alertReceivers=[receiver]))
    assert problem.startswith(
        "alertReceivers[0].pagerduty_configs[0].routing_key_file: '/tmp/key' is not a mounted Secret's key"
    )


def test_the_secrets_the_receivers_read_are_mounted_into_alertmanager() -> None:
    assert credential_secrets([PAGER, HEARTBEAT, TICKETS]) == ["alerting", "slack"]
    platform = args.aws_platform_args(load(prod() | PAGING))
    assert credential_secrets(platform.alert_receivers) == ["alerting"]


def test_warnings_go_where_pages_go_unless_routed_elsewhere() -> None:
    assert alert_routing([PAGER, TICKETS], {"warning": "tickets"}) == {
        "critical": "oncall",
        "warning": "tickets",
        "watchdog": None,
    }
    assert alert_routing([PAGER])["warning"] == "oncall"

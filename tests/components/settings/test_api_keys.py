"""``apiKeys``: a client's keys beside its first (the overlap of a rotation), one key revoked alone, keys that expire;
read from the stack file as a user writes it, refused with the key path and the fix when wrong."""

from __future__ import annotations

from datetime import date

import pytest

from components import args
from components.settings.api_keys import (
    ApiKey,
    KeySpec,
    client_keys,
    expiry_warnings,
    format_problems,
    live_keys,
)
from tests.components.settings.test_validation import aws_stack, problems_of
from tests.components.test_args import load

DAY = date(2026, 11, 29)


def test_a_client_without_an_entry_holds_its_default_key_forever() -> None:
    assert client_keys(("probe", "webapp"), {}) == (ApiKey("probe"), ApiKey("webapp"))
    assert ApiKey("webapp").id == "webapp"


def test_a_listed_client_holds_exactly_its_listed_keys_each_with_its_own_id() -> None:
    keys = client_keys(("probe", "webapp"), {"webapp": (KeySpec("k2"), KeySpec("k3"))})
    assert [k.id for k in keys] == ["probe", "webapp.k2", "webapp.k3"], "webapp's default is revoked: not listed"


def test_a_key_is_refused_from_its_expiry_day_on() -> None:
    key = ApiKey("webapp", "default", date(2026, 12, 1))
    assert live_keys([key], date(2026, 11, 30)) == (key,)
    assert live_keys([key], date(2026, 12, 1)) == ()


def test_the_edge_gets_only_the_live_keys_of_the_stack() -> None:
    settings = load(
        aws_stack(
            apiClients=["webapp", "batch"],
            apiKeys={"webapp": [{"name": "default", "expires": "2026-11-29"}, {"name": "k2"}]},
        )
    )
    assert [k.id for k in args.edge_keys(settings, DAY)] == ["probe", "webapp.k2", "batch"]


def test_plans_warn_two_weeks_ahead_of_an_expiry_and_name_the_key_path() -> None:
    specs = {"webapp": (KeySpec("default", date(2026, 12, 10)), KeySpec("k2"))}
    (warning,) = expiry_warnings(client_keys(("webapp",), specs), specs, DAY)
    assert warning.startswith("apiKeys.webapp[0].expires: key 'webapp' expires on 2026-12-10 (11 day(s)); ")
    far = {"webapp": (KeySpec("default", date(2027, 1, 31)),)}
    assert expiry_warnings(client_keys(("webapp",), far), far, DAY) == []


def test_a_client_whose_every_key_expired_is_warned_about() -> None:
    specs = {"webapp": (KeySpec("default", date(2026, 1, 1)),)}
    warnings = expiry_warnings(client_keys(("webapp",), specs), specs, DAY)
    assert warnings[-1] == "apiKeys.webapp: every key of 'webapp' has expired, so it has none: its requests get 401"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"webapp": []}, (".webapp", "give the list of keys the client holds")),
        ({"webapp": [{"name": "K2"}]}, (".webapp[0].name", "'K2' ")),
        ({"webapp": [{"name": "k2"}, {"name": "k2"}]}, (".webapp[1].name", "'k2' is listed twice for webapp")),
        ({"webapp": [{"name": "k2", "expires": "31/12/2026"}]}, (".webapp[0].expires", "'31/12/2026' is not a date")),
        ({"webapp": [{"name": "k2", "expires": "2026-02-30"}]}, (".webapp[0].expires", "'2026-02-30' is not a date")),
        ({"webapp": [{"name": "k2", "expiry": "2027-01-01"}]}, (".webapp[0].expiry", "is not a field of a key")),
        ({"webapp": [{"expires": "2027-01-01"}]}, (".webapp[0].name", "every key needs a name")),
    ],
    ids=["empty", "bad-name", "twice", "not-iso", "no-such-day", "unknown-field", "no-name"],
)
def test_a_malformed_entry_is_refused_naming_the_key_and_the_fix(value: object, problem: tuple[str, str]) -> None:
    ((path, message),) = format_problems(value)
    assert path == problem[0] and message.startswith(problem[1])


def test_a_date_yaml_already_parsed_is_a_date() -> None:
    assert format_problems({"webapp": [{"name": "k2", "expires": date(2027, 1, 1)}]}) == []


def test_the_stack_refuses_keys_for_the_probe_naming_the_setting_that_replaces_them() -> None:
    problems = problems_of(aws_stack(apiKeys={"probe": [{"name": "k2"}]}), ())
    assert problems == [
        "apiKeys.probe: 'probe' is the integration probe's own key, replaced with apiKeyRotation; list only apiClients"
    ]

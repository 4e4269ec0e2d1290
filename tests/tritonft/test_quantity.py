"""Kubernetes quantities by apimachinery's ``resource.Quantity`` grammar (cases from its own tests)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tritonft.quantity import quantity, quantity_value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", "0.5"),
        ("2", "2"),
        ("1.5", "1.5"),
        ("1k", "1000"),
        ("1Ki", "1024"),
        ("1Mi", "1048576"),
        ("1e3", "1000"),
        ("1E-3", "0.001"),
        ("5.", "5"),
        (".5", "0.5"),
        ("+1", "1"),
        ("-1", "-1"),
        ("100u", "0.0001"),
    ],
)
def test_quantities_parse_by_the_resource_quantity_grammar(text: str, value: str) -> None:
    assert quantity(text) == []
    assert quantity_value(text) == Decimal(value)


@pytest.mark.parametrize("text", ["", "half", "1.5.5", "1 Gi", "1GB", "1gi", "e3", "1e", "1e1.5", "0x10", "1m1"])
def test_quantities_the_api_server_refuses(text: str) -> None:
    assert quantity(text)
    with pytest.raises(ValueError, match="is not a Kubernetes quantity"):
        quantity_value(text)

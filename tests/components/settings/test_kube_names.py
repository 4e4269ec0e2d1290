"""The API server's rules for names, label keys/values and hosts (cases from apimachinery's own tests)."""

from __future__ import annotations

import pytest

from components.settings import kube


@pytest.mark.parametrize("name", ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "1-2", "a" * 63])
def test_rfc1123_labels_the_api_server_accepts(name: str) -> None:
    assert kube.dns1123_label(name) == []


@pytest.mark.parametrize(
    "name", ["", "A", "ABC", "aBc", "A1", "A-1", "-", "a-", "-a", "1-", "_", "a_b", "a.b", "a" * 64]
)
def test_rfc1123_labels_the_api_server_refuses(name: str) -> None:
    assert kube.dns1123_label(name)


@pytest.mark.parametrize(
    "name", ["a", "a.b.c.d.e", "aa.bb.cc", "a1.a2.a3", "11.22.33", "a-1.b-2", ("a" * 63 + ".") * 3 + "a"]
)
def test_rfc1123_subdomains_the_api_server_accepts(name: str) -> None:
    assert kube.dns1123_subdomain(name) == []


@pytest.mark.parametrize("name", ["", "A", "a.B", "a..b", "-a.b", "a.b-", "a_b", "a@b", ".a", "a.", "a" * 254])
def test_rfc1123_subdomains_the_api_server_refuses(name: str) -> None:
    assert kube.dns1123_subdomain(name)


@pytest.mark.parametrize(
    "key",
    [
        "simple",
        "now-with-dashes",
        "1-starts-with-num",
        "1234",
        "simple/simple",
        "now-with-dashes/simple",
        "example.com/my_key",
        "nvidia.com/gpu",
        "node.kubernetes.io/instance-type",
        "a" * 63,
    ],
)
def test_qualified_names_the_api_server_accepts_as_label_keys(key: str) -> None:
    assert kube.qualified_name(key) == []


@pytest.mark.parametrize(
    "key",
    [
        "",
        "nospecialchars%^=@",
        "cantendwithadash-",
        "-cantstartwithadash",
        "only/one/slash",
        "Example.com/x",
        "/simple",
        "example.com/",
        "a" * 64,
        "bad key!",
    ],
)
def test_qualified_names_the_api_server_refuses_as_label_keys(key: str) -> None:
    assert kube.qualified_name(key)


@pytest.mark.parametrize("value", ["", "simple", "now-with-dashes", "1-starts-with-num", "end-with-num-1", "A.b_C-9"])
def test_label_values_the_api_server_accepts(value: str) -> None:
    assert kube.label_value(value) == []


@pytest.mark.parametrize("value", ["-starts", "ends-", "has space", "has/slash", "a" * 64, "true!"])
def test_label_values_the_api_server_refuses(value: str) -> None:
    assert kube.label_value(value)


@pytest.mark.parametrize("host", ["triton.example.com", "a.b", "t5-small.triton.local", "xn--bcher-kva.example"])
def test_ingress_hosts_accepted(host: str) -> None:
    assert kube.ingress_host(host) == []


@pytest.mark.parametrize(
    "host",
    [
        "10.0.0.1",
        "::1",
        "*.example.com",
        "Triton.example.com",
        "triton_dev.example.com",
        "localhost",
        "a." + "b" * 64 + ".com",
        "triton dev.example.com",
        "https://triton.example.com",
    ],
)
def test_ingress_hosts_refused(host: str) -> None:
    assert kube.ingress_host(host)

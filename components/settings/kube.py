"""The rules the Kubernetes API server applies to names, hosts and labels, as pure functions.

They follow ``k8s.io/apimachinery/pkg/util/validation`` (RFC 1123 labels and subdomains, qualified names for label
keys, label values; quantities are :mod:`tritonft.quantity`'s, which preflight shares), so a value the stack accepts
is one the cluster accepts: nothing is left to fail at ``pulumi up`` after the cluster was built.
Each function returns the problems (empty = valid), worded for a stack file's author.
"""

from __future__ import annotations

import ipaddress
import re

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
LABEL_VALUE_MAX = 63
QUALIFIED_NAME_MAX = 63

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(rf"^{_LABEL}$")
_DNS1123_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

_LABEL_HINT = "lower-case letters, digits and '-', starting and ending with a letter or digit (e.g. 'my-name')"
_SUBDOMAIN_HINT = "lower-case letters, digits, '-' and '.', each part starting and ending with a letter or digit"


def dns1123_label(value: str) -> list[str]:
    """An RFC 1123 label: namespaces, Service/Deployment names, model names."""
    return _rfc1123(value, _DNS1123_LABEL, DNS1123_LABEL_MAX, f"label: use {_LABEL_HINT}")


def dns1123_subdomain(value: str) -> list[str]:
    """An RFC 1123 subdomain: Secret, StorageClass, IngressClass and ClusterIssuer names."""
    return _rfc1123(
        value, _DNS1123_SUBDOMAIN, DNS1123_SUBDOMAIN_MAX, f"subdomain: use {_SUBDOMAIN_HINT} (e.g. 'example.com')"
    )


def _rfc1123(value: str, pattern: re.Pattern[str], limit: int, what: str) -> list[str]:
    problems = []
    if len(value) > limit:
        problems.append(f"must be at most {limit} characters (it has {len(value)})")
    if not pattern.match(value):
        problems.append(f"is not a valid RFC 1123 {what}")
    return problems


def ingress_host(value: str) -> list[str]:
    """An Ingress rule's host: an RFC 1123 subdomain, not an IP address, every DNS label at most 63 characters.

    The API server also allows a leading ``*.``; here the host is a base name under which each model gets its own
    host, so a wildcard is refused too.
    """
    try:
        ipaddress.ip_address(value)
    except ValueError:
        pass
    else:
        return ["is an IP address; an Ingress host must be a DNS name (e.g. triton.example.com)"]
    if value.startswith("*."):
        return ["must not be a wildcard: each model is served at `<model>.<ingressHost>`; give the base name"]
    problems = dns1123_subdomain(value)
    long_labels = [part for part in value.split(".") if len(part) > DNS1123_LABEL_MAX]
    if long_labels:
        problems.append(f"has a DNS label longer than {DNS1123_LABEL_MAX} characters ({long_labels[0][:20]}...)")
    if "." not in value and not problems:
        problems.append("is not a fully qualified DNS name (e.g. triton.example.com)")
    return problems


def qualified_name(value: str) -> list[str]:
    """A label key, annotation key or toleration key: ``[prefix/]name``, prefix an RFC 1123 subdomain."""
    prefix, slash, name = value.rpartition("/")
    if slash and not prefix:
        return ["has an empty prefix before '/'"]
    problems: list[str] = []
    if prefix:
        problems += [f"prefix {prefix!r} {p}" for p in dns1123_subdomain(prefix)]
    if not name:
        problems.append("has an empty name part")
    elif len(name) > QUALIFIED_NAME_MAX:
        problems.append(f"name part must be at most {QUALIFIED_NAME_MAX} characters")
    elif not _QUALIFIED_NAME.match(name):
        problems.append(
            "is not a qualified name: alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric, "
            "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/my-key')"
        )
    return problems


def label_value(value: str) -> list[str]:
    """A label value: empty, or at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric."""
    if len(value) > LABEL_VALUE_MAX:
        return [f"must be at most {LABEL_VALUE_MAX} characters"]
    if not _LABEL_VALUE.match(value):
        return ["is not a valid label value: alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"]
    return []

"""EKS facts the settings validate against: the Kubernetes versions EKS offers (and until when), NAT modes, log
retentions. Pure data and functions; ``components.platform.aws`` builds with them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime


@dataclass(frozen=True)
class EksVersion:
    """One Kubernetes minor on EKS: when EKS released it and when its standard and extended support end."""

    minor: str
    eks_release: date
    end_of_standard: date
    end_of_extended: date


EKS_VERSIONS: dict[str, EksVersion] = {
    v.minor: v
    for v in (
        EksVersion("1.32", date(2025, 1, 23), date(2026, 3, 23), date(2027, 3, 23)),
        EksVersion("1.33", date(2025, 5, 29), date(2026, 7, 29), date(2027, 7, 29)),
        EksVersion("1.34", date(2025, 10, 2), date(2026, 12, 2), date(2027, 12, 2)),
        EksVersion("1.35", date(2026, 1, 28), date(2027, 3, 27), date(2028, 3, 27)),
        EksVersion("1.36", date(2026, 6, 2), date(2027, 8, 2), date(2028, 8, 2)),
    )
}
"""EKS's Kubernetes release calendar (UTC dates), read 2026-11-26: the EKS user guide's "Amazon EKS Kubernetes
release calendar" (1.32-1.34), endoflife.date/amazon-eks (1.35) and a third-party EKS 1.36 upgrade write-up of
2026-08-16 (1.36: on EKS 2026-06-02, standard support to 2027-08-02; AWS's own page for it was not in reach).
Standard support lasts 14 months after the EKS release, extended support 12 more at $0.60 instead of $0.10 per
cluster hour. A version missing here is refused; one offered here but without a pinned cluster-autoscaler
(``components/settings/chart_facts.py``) is refused when a node group may grow (rule ``charts-made-for-the-minor``)."""

DEFAULT_KUBERNETES_VERSION = "1.35"
"""In standard support until 2027-03-27 with a cluster-autoscaler release of its own (v1.35.1); 1.36 is newer
(standard support to 2027-08-02) but has no cluster-autoscaler chart yet, so it is accepted only with fixed-size node
groups; the default moves to it once a chart of app 1.36 is pinned and the charts are proven on it."""

EXTENDED_SUPPORT_WARNING_DAYS = 90
"""Warn this long before a version leaves standard support (an upgrade takes planning)."""


def support_status(minor: str, today: date) -> str:
    """``standard``, ``extended``, ``ended`` or ``unknown`` (not in :data:`EKS_VERSIONS`) on ``today``."""
    version = EKS_VERSIONS.get(minor)
    if version is None:
        return "unknown"
    if today < version.end_of_standard:
        return "standard"
    return "extended" if today < version.end_of_extended else "ended"


SUPPORT_TYPES = ("standard", "extended")
"""``eksSupport``: the cluster's upgrade policy (EKS's ``upgradePolicy.supportType``)."""
DEFAULT_SUPPORT = "standard"
"""No extended-support billing unless asked for: at the end of standard support EKS upgrades the control plane to
the next minor itself (EKS's own default, ``EXTENDED``, bills $0.60 instead of $0.10 an hour from that day on)."""


def version_warnings(minor: str, today: date, support: str = DEFAULT_SUPPORT) -> list[str]:
    """What the settings warn about a version that soon leaves standard support, or is billed as extended support."""
    version = EKS_VERSIONS.get(minor)
    status = support_status(minor, today)
    if version is None or status == "ended" or (status == "extended" and support == "standard"):
        return []  # refused by version_problems
    newest = max(EKS_VERSIONS.values(), key=lambda v: v.eks_release).minor
    if status == "extended":
        return [
            f"kubernetesVersion: {minor} left EKS standard support on {version.end_of_standard.isoformat()}: the "
            f"control plane is billed as extended support ($0.60 instead of $0.10 an hour, ~$365 more a month) "
            f"until {version.end_of_extended.isoformat()}; upgrade one minor at a time towards {newest}"
        ]
    left = (version.end_of_standard - today).days
    if left <= EXTENDED_SUPPORT_WARNING_DAYS and support == "standard":
        return [
            f"kubernetesVersion: {minor} leaves EKS standard support on {version.end_of_standard.isoformat()} "
            f"(in {left} days): with eksSupport: standard EKS then upgrades the control plane to the next minor by "
            "itself, and the next `up` (still asking for "
            f"{minor}) would fail; bump kubernetesVersion one minor before that day (node groups and add-ons "
            "follow), or set eksSupport: extended to stay, billed $0.60 instead of $0.10 an hour"
        ]
    if left <= EXTENDED_SUPPORT_WARNING_DAYS:
        return [
            f"kubernetesVersion: {minor} leaves EKS standard support on {version.end_of_standard.isoformat()} "
            f"(in {left} days), after which the control plane is billed as extended support ($0.60 instead of "
            f"$0.10 an hour); plan the upgrade to {newest}"
        ]
    return []


def version_problems(minor: str, today: date, support: str = DEFAULT_SUPPORT) -> list[str]:
    """A version EKS no longer offers (past extended support) or that this project pins nothing for; a version in
    extended support under ``eksSupport: standard`` (EKS runs no cluster of it without extended support)."""
    status = support_status(minor, today)
    known = ", ".join(v for v in EKS_VERSIONS if support_status(v, today) != "ended")
    if status == "unknown":
        return [f"kubernetesVersion: {minor!r} is not a version this stack supports on EKS; use one of {known}"]
    if status == "ended":
        return [f"kubernetesVersion: {minor} is past EKS extended support (no new clusters); use one of {known}"]
    if status == "extended" and support == "standard":
        end = EKS_VERSIONS[minor].end_of_standard.isoformat()
        return [
            f"kubernetesVersion: {minor} left EKS standard support on {end}, and eksSupport is standard (no "
            "extended-support billing): EKS runs it only under extended support; upgrade to a minor in standard "
            f"support ({', '.join(v for v in EKS_VERSIONS if support_status(v, today) == 'standard')}), or set "
            "eksSupport: extended ($0.60 instead of $0.10 an hour)"
        ]
    return []


NAT_MODES = ("single", "per-zone")

LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
"""The retentions CloudWatch Logs accepts (``PutRetentionPolicy``)."""


def today() -> date:
    """The date versions are judged on (UTC); one function, so tests can fix it."""
    return datetime.now(UTC).date()

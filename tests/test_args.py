"""Settings -> component Args: the mappings the composition root relies on."""

from __future__ import annotations

import json

import pytest

from components import args
from components.settings import load_settings
from tests.settings.test_validation import aws_stack, kubernetes_stack


def load(values: dict[str, object], stack: str = "test"):
    cli = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    return load_settings(cli, project="triton-ft", stack=stack)


def test_each_model_is_served_on_its_own_host_under_the_base_name() -> None:
    settings = load(kubernetes_stack(ingressHost="triton.example.com"))
    assert args.model_host(settings, settings.models[0]) == "t5-small.triton.example.com"


@pytest.mark.parametrize(("quantity", "value"), [("500m", 0.5), ("2", 2.0), ("1k", 1000.0), ("1.5", 1.5)])
def test_quantities_become_numbers(quantity: str, value: float) -> None:
    assert args.quantity_value(quantity) == value


def test_autoscaler_is_none_when_min_equals_max_and_hpa_otherwise() -> None:
    fixed = load(kubernetes_stack(replicasMin=1, replicasMax=1))
    assert args.autoscaler_kind(fixed) == "none"
    scaled = load(kubernetes_stack(replicasMax=3, existingAddons=["kube-prometheus-stack", "prometheus-adapter"]))
    assert args.autoscaler_kind(scaled) == "hpa"


def test_the_prometheus_stack_addon_is_known_to_components_as_the_operator() -> None:
    settings = load(kubernetes_stack(existingAddons=["kube-prometheus-stack"]))
    assert "prometheus-operator" in args.existing_cluster_args(settings).addons


def test_aws_addons_are_exactly_the_listed_ones() -> None:
    settings = load(aws_stack(addons=["ingress-nginx"]))
    flags = args.aws_platform_args(settings).addons
    assert flags.ingress_nginx and not flags.kube_prometheus_stack and not flags.prometheus_adapter


def test_probe_authenticates_through_an_authenticated_ingress_from_the_environment() -> None:
    basic = load(aws_stack(ingressAuth="basic", basicAuthSecretName="creds"))
    assert args.integration_probe_header_env(basic) == {"Authorization": args.PROBE_AUTH_ENV}
    open_ = load(kubernetes_stack())
    assert args.integration_probe_header_env(open_) == {}

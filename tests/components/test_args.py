"""Settings -> component Args: the mappings the composition root relies on."""

from __future__ import annotations

import dataclasses
import json
from datetime import date

import pytest

from components import args
from components.common.exposure import EdgeObjectsArgs
from components.gateway import GatewayArgs
from components.platform.aws import charts
from components.serving.promotion import Candidate
from components.settings import Settings, load_settings
from tests.components.fixtures import MINILM_CPU, TOOLS_IMAGE, make_target
from tests.components.settings.test_validation import aws_stack, ingress_stack, kubernetes_stack
from tritonft.synth.engine import RecordingMocks, run_program


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
    values = {k: v for k, v in aws_stack(addons=["envoy-gateway"], ingressTls=False).items() if k != "acmeEmail"}
    settings = load(values)
    flags = args.aws_platform_args(settings).addons
    assert flags.envoy_gateway and not flags.ingress_nginx and not flags.cert_manager
    assert not flags.kube_prometheus_stack and not flags.prometheus_adapter


def test_aws_installs_metrics_server_when_the_gateway_autoscales_on_cpu() -> None:
    flags = args.aws_platform_args(load(aws_stack(gatewayReplicasMin=2, gatewayReplicasMax=4))).addons
    assert flags.metrics_server


@pytest.mark.parametrize("overrides", [{"gateway": False}, {"gatewayReplicasMin": 2, "gatewayReplicasMax": 2}])
def test_aws_installs_no_metrics_server_without_a_gateway_hpa(overrides: dict[str, object]) -> None:
    assert not args.aws_platform_args(load(aws_stack(**overrides))).addons.metrics_server


def test_probe_authenticates_through_an_authenticated_ingress_from_the_environment() -> None:
    basic = load(ingress_stack())
    assert args.integration_probe_header_env(basic) == {"Authorization": args.PROBE_AUTH_ENV}
    open_ = load(kubernetes_stack())
    assert args.integration_probe_header_env(open_) == {}


def test_behind_api_keys_the_probe_reads_no_environment_it_sends_its_own_key() -> None:
    assert args.integration_probe_header_env(load(aws_stack())) == {}
    assert args.api_clients(load(aws_stack(apiClients=["webapp"]))) == ("probe", "webapp")


def test_the_gateway_is_on_by_default_and_off_on_request() -> None:
    assert load(kubernetes_stack()).serving.gateway.enabled
    assert not load(kubernetes_stack(gateway=False)).serving.gateway.enabled


def test_the_gateway_is_exposed_on_the_base_host_with_the_models_tls_and_auth() -> None:
    settings = load(ingress_stack(ingressHost="triton.example.com", basicAuthSecretName="creds"))
    model = args.ingress_args(settings, MINILM_CPU, None)
    assert model is not None
    gateway = args.exposure_args(settings, settings.serving.ingress.host, None)
    assert gateway == dataclasses.replace(model, host="triton.example.com")
    assert gateway.basic_auth_secret == "creds"


def test_on_the_gateway_edge_an_encoder_gets_routes_on_its_own_listener() -> None:
    settings = load(aws_stack(ingressHost="triton.example.com", dnsZone="example.com"))
    model = args.model_edge_args(settings, MINILM_CPU)
    assert args.ingress_args(settings, MINILM_CPU, None) is None
    assert model is not None and model.host == "minilm.triton.example.com"
    assert (model.gateway.name, model.listener, model.api_key_auth) == ("test-edge", "https-m-minilm", True)


@pytest.mark.parametrize("edge", ["gateway", "ingress"])
def test_a_fastertransformer_models_triton_gets_no_edge_route_of_any_kind(edge: str) -> None:
    """Triton 23.04 is reached by the OpenAI gateway only (issue 51): no HTTPRoute, GRPCRoute, Ingress or host."""
    settings = load(aws_stack() if edge == "gateway" else ingress_stack())
    (t5,) = [m for m in settings.models if m.family.is_fastertransformer]
    assert args.model_edge_args(settings, t5) is None
    assert args.ingress_args(settings, t5, None) is None
    assert f"{t5.name}.{settings.serving.ingress.host}" not in args.edge_hosts(settings)
    # Still judged before it takes traffic: its judge asks the candidate from inside the cluster.
    assert args.judged_before_the_switch(settings, t5)


def test_on_a_users_own_gateway_routes_name_no_listener() -> None:
    values = ingress_stack(edge="gateway", gatewayName="shared", gatewayNamespace="edge", basicAuthSecretName=None)
    settings = load(values | {"ingressAuth": "apiKey", "existingAddons": ["envoy-gateway"]})
    model = args.model_edge_args(settings, MINILM_CPU)
    assert model is not None
    assert (model.gateway.name, model.gateway.namespace, model.listener) == ("shared", "edge", None)


def test_gateway_knobs_reach_the_gateway_args(mocks: RecordingMocks) -> None:
    knobs = {"gatewayReplicasMin": 1, "gatewayReplicasMax": 6, "gatewayCpu": "250m", "gatewayMemory": "1Gi"}
    settings = load(kubernetes_stack(**knobs, gatewayDeadlineSeconds=90, gatewayCoalesce=False))
    made: list[GatewayArgs] = []

    def build() -> None:
        made.append(
            args.gateway_args(settings, target=make_target(), backends=(), tools_image=TOOLS_IMAGE, htpasswd=None)
        )

    run_program(build)
    (gateway,) = made
    assert (gateway.min_replicas, gateway.max_replicas, gateway.cpu, gateway.memory) == (1, 6, "250m", "1Gi")
    assert gateway.deadline_seconds == 90
    assert gateway.coalesce is False
    assert gateway.image == TOOLS_IMAGE
    assert gateway.ingress is not None and gateway.ingress.host == settings.serving.ingress.host


def _gateway_args(settings: Settings) -> GatewayArgs:
    made: list[GatewayArgs] = []
    run_program(
        lambda: made.append(
            args.gateway_args(settings, target=make_target(), backends=(), tools_image=TOOLS_IMAGE, htpasswd=None)
        )
    )
    return made[0]


def test_the_gateway_caps_each_api_client_from_the_edges_cap_by_default(mocks: RecordingMocks) -> None:
    settings = load(aws_stack(maxConcurrentRequests=200, gatewayReplicasMax=5))
    assert _gateway_args(settings).max_in_flight_per_client == 200 // (2 * 5)


def test_the_per_client_cap_stated_reaches_the_gateway(mocks: RecordingMocks) -> None:
    assert _gateway_args(load(aws_stack(maxConcurrentPerClient=7))).max_in_flight_per_client == 7


def test_the_gateway_is_given_each_live_keys_expiry_day(mocks: RecordingMocks) -> None:
    keys = {"webapp": [{"name": "default", "expires": "2999-01-01"}, {"name": "k2"}]}
    settings = load(aws_stack(apiClients=["webapp"], apiKeys=keys))
    assert _gateway_args(settings).key_expiries == (("webapp", date(2999, 1, 1)),)


def test_a_gateway_behind_no_api_keys_counts_no_client(mocks: RecordingMocks) -> None:
    assert _gateway_args(load(ingress_stack())).max_in_flight_per_client == 0


def test_gemm_tuning_is_off_in_local_and_on_elsewhere_by_default() -> None:
    assert args.gemm_tuning(load(kubernetes_stack())).enabled is False, "kubernetes_stack is environment local"
    assert args.gemm_tuning(load(kubernetes_stack(environment="dev", ingressAuth="none", ingressTls=False))).enabled
    assert args.gemm_tuning(load(aws_stack())).enabled is True


def test_gemm_tuning_knobs_reach_the_service_args() -> None:
    on = args.gemm_tuning(load(kubernetes_stack(gemmTuning=True, gemmTuningTimeoutSeconds=300)))
    assert (on.enabled, on.timeout_seconds) == (True, 300)
    assert args.gemm_tuning(load(aws_stack(gemmTuning=False))).enabled is False


def test_the_gemm_cache_is_keyed_by_the_image_the_stack_builds() -> None:
    tuning = args.gemm_tuning(load(kubernetes_stack(tritonVersion="23.05", ftCommit="a" * 40)))
    assert (tuning.triton_version, tuning.ft_commit) == ("23.05", "a" * 40)


def test_the_engine_images_setting_gives_the_images_their_engines_prebuilt_servers() -> None:
    vllm = "registry.example.com/triton-ft/server-vllm@sha256:" + "1" * 64
    onnx = "registry.example.com/triton-ft/server-onnxruntime@sha256:" + "2" * 64
    settings = load(kubernetes_stack(engineImages={"vllm": vllm, "onnxruntime": onnx}))
    image_args = args.triton_image_args(settings, None)
    assert image_args.engine_prebuilt == {"vllm": vllm, "onnxruntime": onnx}


def test_an_encoder_is_converted_by_the_onnx_converters_version() -> None:
    from tests.components.settings.test_validation import MINILM, T5_SMALL
    from tritonft.convert.writer import CONVERTER_VERSION
    from tritonft.encoder.convert import CONVERTER_VERSION as ONNX_CONVERTER_VERSION

    settings = load(kubernetes_stack(models=[dict(T5_SMALL), dict(MINILM, device="cpu")]))
    assert [args.converter_version(m) for m in settings.models] == [CONVERTER_VERSION, ONNX_CONVERTER_VERSION]


def test_a_cpu_models_service_surges_packs_nothing_and_waits_for_no_gpu_node_autoscaler() -> None:
    from types import SimpleNamespace
    from typing import Any, cast

    from tests.components.settings.test_validation import MINILM, T5_SMALL

    settings = load(aws_stack(models=[dict(T5_SMALL), dict(MINILM, device="cpu")], gpuNodesMax=4))
    assert args.node_growth(settings).autoscaler, "the GPU models' pods may wait for the GPU node autoscaler"
    service = args.triton_service_args(
        settings,
        target=cast(Any, None),
        store=cast(Any, None),
        conversion=cast(Any, SimpleNamespace(model=settings.models[1])),
        server_image="server@sha256:" + "b" * 64,
        htpasswd=None,
    )
    assert service.node_growth.autoscaler is False
    assert service.gpus_per_node is None
    assert (service.rollout.max_surge, service.rollout.max_unavailable) == (1, 0)


def test_a_llama_family_model_is_rendered_by_the_pinned_vllms_renderer_and_uses_its_engine() -> None:
    from tests.components.settings.test_validation import QWEN7B, T5_SMALL
    from tritonft.engines.vllm.versions import VLLM_VERSION

    settings = load(kubernetes_stack(models=[dict(T5_SMALL), dict(QWEN7B)]))
    assert args.converter_version(settings.models[1]) == f"vllm-{VLLM_VERSION}"
    assert args.engines_in_use(settings) == ("fastertransformer", "vllm")


def test_a_models_own_token_secret_replaces_the_stacks_token_for_that_model(mocks: RecordingMocks) -> None:
    from tests.components.settings.test_validation import LLAMA8B

    settings = load(kubernetes_stack(gpuType="H100", models=[dict(LLAMA8B, hfTokenSecret="hf-token")]))
    assert settings.token_secrets == {"llama": "hf-token"}
    from components.models.conversion import ModelConversionArgs

    made: list[ModelConversionArgs] = []

    def build() -> None:
        target = make_target()
        from components.models.store import ModelStore, ModelStoreArgs

        store = ModelStore("s", ModelStoreArgs(target=target, models=settings.models))
        made.append(
            args.model_conversion_args(
                target, store, settings.models[0], TOOLS_IMAGE, "stack-token", hf_token_secret="hf-token"
            )
        )

    run_program(build)
    (conversion,) = made
    assert conversion.hf_token_secret == "hf-token" and conversion.hf_token is None


def test_a_vllm_models_service_runs_the_vllm_images_triton_release(mocks: RecordingMocks) -> None:
    from components.models.conversion import ModelConversion
    from components.models.store import ModelStore, ModelStoreArgs
    from tests.components.settings.test_validation import QWEN7B, T5_SMALL
    from tritonft.engines.vllm.versions import TRITON_VERSION

    settings = load(kubernetes_stack(models=[dict(T5_SMALL), dict(QWEN7B)]))
    releases: list[str] = []

    def build() -> None:
        target = make_target()
        store = ModelStore("s", ModelStoreArgs(target=target, models=settings.models))
        for model in settings.models:
            conversion = ModelConversion(
                model.name, args.model_conversion_args(target, store, model, TOOLS_IMAGE, None)
            )
            service = args.triton_service_args(
                settings, target=target, store=store, conversion=conversion, server_image="i", htpasswd=None
            )
            releases.append(service.triton_release)

    run_program(build)
    assert releases == [settings.image.triton_version, TRITON_VERSION]
    assert TRITON_VERSION == "26.08" != settings.image.triton_version


def test_each_model_runs_the_triton_release_of_its_engines_image() -> None:
    from tests.components.settings.test_validation import MINILM, T5_SMALL

    settings = load(kubernetes_stack(models=[dict(T5_SMALL), dict(MINILM, device="cpu")], tritonVersion="23.05"))
    assert [args.triton_release_of(settings, m) for m in settings.models] == ["23.05", "25.12"]


def test_a_models_longest_request_is_the_gateways_deadline_when_only_the_gateway_calls_it() -> None:
    settings = load(kubernetes_stack(gatewayDeadlineSeconds=90))
    assert args.longest_request_seconds(settings, settings.models[0], ()) == 90


def test_a_model_exposed_on_the_edge_waits_out_the_edges_request_timeout_too() -> None:
    settings = load(kubernetes_stack(gatewayDeadlineSeconds=90))
    assert args.longest_request_seconds(settings, settings.models[0], (300,)) == 300


def vllm_settings(**vllm: object) -> Settings:
    from tests.components.settings.test_validation import QWEN7B, T5_SMALL

    qwen = dict(QWEN7B, vllm={"maxModelLen": 16384, **vllm})
    settings: Settings = load(kubernetes_stack(models=[dict(T5_SMALL), qwen], gatewayDeadlineSeconds=60))
    return settings


def test_a_vllm_models_pods_drain_for_its_longest_answer_at_the_stated_pace() -> None:
    settings = vllm_settings(timePerOutputTokenSeconds=0.05)
    t5, qwen = settings.models
    # 60 s + 16384 tokens x 0.05 s = 879.2 s, rounded up; the FasterTransformer model keeps the gateway's 60 s
    assert args.longest_request_seconds(settings, qwen, ()) == 880
    assert args.longest_request_seconds(settings, t5, ()) == 60


def test_the_proxies_in_front_of_the_gateway_outlast_its_longest_deadline() -> None:
    assert args.api_timeout_seconds(vllm_settings(timePerOutputTokenSeconds=0.05)) == 880 + args.PROXY_MARGIN_S
    assert args.api_timeout_seconds(vllm_settings(timePerOutputTokenSeconds=0.1)) == 1699 + args.PROXY_MARGIN_S


def test_without_a_long_deadline_the_proxies_keep_their_five_minutes() -> None:
    assert args.api_timeout_seconds(load(kubernetes_stack(gatewayDeadlineSeconds=90))) == args.PROXY_TIMEOUT_S == 300


def test_a_failed_judge_says_its_candidate_is_kept_how_to_see_it_and_what_removes_it() -> None:
    candidate = Candidate("t5-small", "0a1b2c3d", "local-t5-small-0a1b2c3d", "http://x", judge_pods={})

    hint = args.failed_candidate_hint("triton-local", candidate)

    assert hint.startswith("The candidate version 0a1b2c3d of t5-small is left running beside the serving version")
    assert "`kubectl -n triton-local get deployment,pods,service -l triton-ft.io/version=0a1b2c3d`" in hint
    assert "`kubectl -n triton-local logs deployment/local-t5-small-0a1b2c3d -c triton`" in hint
    assert "the next `pulumi up` removes it" in hint and "`pulumi destroy` removes it too" in hint


def test_a_vllm_engines_cpu_limit_is_the_largest_gpu_node_it_may_land_on() -> None:
    assert args.gpu_node_cpus(load(aws_stack())) == 48  # g5.12xlarge
    assert args.gpu_node_cpus(load(aws_stack(gpuFallbackInstanceTypes=["g5.24xlarge"]))) == 96


def test_an_existing_clusters_gpu_node_cpus_are_what_it_states() -> None:
    assert args.gpu_node_cpus(load(kubernetes_stack(gpuNodeCpus=32))) == 32
    assert args.gpu_node_cpus(load(kubernetes_stack())) is None


def test_a_failed_judge_of_a_version_that_rolled_in_place_says_it_serves_and_how_to_roll_back() -> None:
    judged = Candidate("gpt2", "0a1b2c3d", "dev-gpt2", "http://x", judge_pods={}, in_place=True)

    hint = args.failed_in_place_hint("triton", judged)

    assert hint.startswith("Version 0a1b2c3d of gpt2 rolled in place (no room for a candidate")
    assert "SERVES NOW: every pod of the model runs it" in hint
    assert "a pipeline promoting this change to the next environment stops" in hint
    assert "revert the change in the stack's settings" in hint and "`pulumi stack history`" in hint
    assert "`kubectl -n triton logs job/dev-gpt2-judge`" in hint


def test_the_judge_of_a_version_that_rolled_in_place_carries_the_in_place_hint() -> None:
    settings = load(kubernetes_stack())
    model = settings.models[0]
    judged = Candidate(model.name, "0a1b2c3d", f"test-{model.name}", "http://x", judge_pods={}, in_place=True)

    probe = args.judge_probe_args(settings, judged, model, "sha256:abc")

    assert probe.failure_hint == args.failed_in_place_hint(settings.namespace, judged)
    (target,) = probe.models
    assert probe.endpoint == "http://x" and target.reference == model.family.is_fastertransformer


def _edge_objects_args(settings: Settings) -> EdgeObjectsArgs:
    made: list[EdgeObjectsArgs | None] = []
    run_program(lambda: made.append(args.edge_objects_args(settings, make_target())))
    (edge,) = made
    assert edge is not None
    return edge


def test_a_rate_limit_redis_turns_on_envoy_gateways_rate_limit_service_and_the_shared_buckets(
    mocks: RecordingMocks,
) -> None:
    settings = load(aws_stack(rateLimitRedis="limits.example.com:6379"))
    flags = args.aws_platform_args(settings).addons
    assert flags.rate_limit_redis == "limits.example.com:6379"
    backend = {"type": "Redis", "redis": {"url": "limits.example.com:6379"}}
    assert charts.envoy_gateway_values(flags.rate_limit_redis)["config"]["envoyGateway"]["rateLimit"] == {
        "backend": backend
    }
    assert _edge_objects_args(settings).global_rate_limit


def test_without_a_rate_limit_redis_envoy_gateway_runs_no_rate_limit_service_and_the_buckets_are_local(
    mocks: RecordingMocks,
) -> None:
    settings = load(aws_stack())
    assert (
        "rateLimit"
        not in charts.envoy_gateway_values(args.aws_platform_args(settings).addons.rate_limit_redis)["config"][
            "envoyGateway"
        ]
    )
    assert not _edge_objects_args(settings).global_rate_limit


def test_a_vllm_models_judge_renders_its_chats_from_the_versions_checkpoint_where_the_judge_mounts_it() -> None:
    from components.serving.judge_job import CHECKPOINT_MOUNT

    settings = vllm_settings()
    qwen = settings.models[1]
    candidate = Candidate(qwen.name, "0a1b2c3d", f"test-{qwen.name}-0a1b2c3d", "http://x", judge_pods={})

    probe = args.judge_probe_args(settings, candidate, qwen, "sha256:abc")

    (target,) = probe.models
    assert target.tokenizer_config == f"{CHECKPOINT_MOUNT}/tokenizer_config.json"
    assert args.judged_chat_checkpoint(qwen) == f"hf/{qwen.name}/{qwen.revision}"


def test_a_fastertransformer_models_judge_renders_no_chat() -> None:
    settings = vllm_settings()
    t5 = settings.models[0]
    candidate = Candidate(t5.name, "0a1b2c3d", f"test-{t5.name}-0a1b2c3d", "http://x", judge_pods={})

    (target,) = args.judge_probe_args(settings, candidate, t5, "sha256:abc").models
    assert target.tokenizer_config is None and args.judged_chat_checkpoint(t5) is None


@pytest.mark.parametrize("redis", [None, "limits.example.com:6379"])
def test_the_envoy_gateway_the_stack_installs_runs_lua_policies(redis: str | None) -> None:
    """The edge's key-expiry check is a Lua policy, and Envoy Gateway v1.9 answers 500 on every route a Lua policy
    targets while Lua is off (its default)."""
    assert charts.envoy_gateway_values(redis)["config"]["envoyGateway"]["extensionApis"] == {"enableLua": True}

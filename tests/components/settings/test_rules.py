"""Every cross-field rule, one by one: a stack that breaks only that rule, and the exact message a user gets."""

from __future__ import annotations

import re
from typing import Any

import pytest

from components.settings.load import load_settings
from components.settings.rules import MODEL_RULES, PLAN_RULES, STACK_RULES
from components.settings.schema import schema_path
from tests.components.settings.test_validation import (
    AWS_ADDONS,
    GPT2,
    GPTJ,
    LLAMA8B,
    MINILM,
    QWEN7B,
    SST2,
    SST2_CLASSIFIER,
    T5_SMALL,
    as_cli,
    aws_ingress_stack,
    aws_stack,
    ingress_stack,
    kubernetes_stack,
    model,
    problems_of,
)

ARCH = {"dModel": 256, "numHeads": 4, "numLayers": 4, "dFf": 1024, "vocabSize": 1000, "maxPositions": 2048}
PROMETHEUS = ["kube-prometheus-stack"]
SECRET_HTPASSWD = ("ingressHtpasswd",)

# rule id -> (stack, secret keys, the exact message)
CASES: dict[str, tuple[dict[str, Any], tuple[str, ...], str]] = {
    "gpu-nodes-range": (
        aws_stack(gpuNodesMin=1, gpuNodesDesired=3, gpuNodesMax=2),
        (),
        "gpuNodesDesired: 3 must lie within gpuNodesMin..gpuNodesMax = 1..2",
    ),
    "system-nodes-range": (
        aws_stack(systemNodesMin=4, systemNodesMax=2),
        (),
        "systemNodesMin: 4 is larger than systemNodesMax=2; lower the minimum or raise the maximum",
    ),
    "existing-vpc-needs-subnets": (
        aws_stack(vpcId="vpc-0123456789abcdef0"),
        (),
        "subnetIds: an existing VPC (vpcId) needs its private subnet ids (one per zone, at least 2)",
    ),
    "subnets-in-two-zones": (
        aws_stack(vpcId="vpc-0123456789abcdef0", subnetIds=["subnet-0123456789abcdef0"]),
        (),
        "subnetIds: EKS needs private subnets in at least 2 availability zones; list one per zone",
    ),
    "public-subnets-need-vpc": (
        aws_stack(publicSubnetIds=["subnet-0123456789abcdef0"]),
        (),
        "publicSubnetIds: only used with an existing VPC: set vpcId and subnetIds, or remove publicSubnetIds",
    ),
    "prometheus-adapter-needs-prometheus": (
        aws_stack(addons=["prometheus-adapter"]),
        (),
        "addons: prometheus-adapter reads the Prometheus of kube-prometheus-stack; add it too",
    ),
    "build-needs-registry": (
        kubernetes_stack(imageRegistry=None),
        (),
        "imageRegistry: required on platform kubernetes unless both serverImage and toolsImage are prebuilt "
        "(the built images must be pushed somewhere the cluster can pull from)",
    ),
    "cuda-archs-cover-gpu": (
        kubernetes_stack(gpuType="H100", cudaArchs=["80", "86"]),
        (),
        "cudaArchs: the H100 GPUs need sm_90; add '90' to cudaArchs",
    ),
    "replicas-range": (
        kubernetes_stack(replicasMin=3, replicasMax=2),
        (),
        "replicasMin: 3 is larger than replicasMax=2; lower the minimum or raise the maximum",
    ),
    "gateway-replicas-range": (
        kubernetes_stack(gatewayReplicasMin=3, gatewayReplicasMax=2),
        (),
        "gatewayReplicasMin: 3 is larger than gatewayReplicasMax=2; lower the minimum or raise the maximum",
    ),
    "zero-replicas-need-scale-to-zero": (
        kubernetes_stack(replicasMin=0),
        (),
        "replicasMin: 0 needs scaleToZero: true (an HPA cannot scale to zero)",
    ),
    "scale-to-zero-needs-keda": (
        kubernetes_stack(scaleToZero=True, replicasMin=0, existingAddons=PROMETHEUS),
        (),
        "scaleToZero: needs KEDA; add `keda` to `addons` (or `existingAddons`) or turn it off",
    ),
    "scale-to-zero-needs-monitoring": (
        kubernetes_stack(scaleToZero=True, replicasMin=0, existingAddons=["keda"]),
        (),
        "scaleToZero: KEDA scales on the queue:compute ratio the PrometheusRule records; needs monitoring "
        "(kube-prometheus-stack in `addons` or `existingAddons`), or turn scaleToZero off",
    ),
    "monitoring-needs-prometheus-operator": (
        kubernetes_stack(monitoring=True),
        (),
        "monitoring: needs the Prometheus operator CRDs; add `kube-prometheus-stack` to `addons` (or "
        "`existingAddons`) or set monitoring: false",
    ),
    "autoscaling-needs-prometheus-adapter": (
        kubernetes_stack(replicasMax=3, existingAddons=PROMETHEUS),
        (),
        "autoscaling: the HPA reads Triton's queue:compute ratio through prometheus-adapter; add "
        "`prometheus-adapter` to `addons` (or `existingAddons`), or set autoscaling: false",
    ),
    "autoscaling-needs-monitoring": (
        kubernetes_stack(
            replicasMax=3, existingAddons=["kube-prometheus-stack", "prometheus-adapter"], monitoring=False
        ),
        (),
        "autoscaling: the HPA scales on the queue:compute ratio the PrometheusRule records; needs monitoring "
        "(kube-prometheus-stack), or set autoscaling: false",
    ),
    "tls-issuer-needs-cert-manager": (
        aws_stack(addons=["envoy-gateway"], tlsIssuer="letsencrypt-prod"),
        (),
        "tlsIssuer: needs cert-manager; add `cert-manager` to `addons` (or `existingAddons`) or use tlsSecretName",
    ),
    "one-tls-source": (
        aws_stack(tlsIssuer="letsencrypt-prod", tlsSecretName="triton-tls"),
        (),
        "tlsSecretName: give tlsIssuer (cert-manager signs) or tlsSecretName (an existing Secret), not both",
    ),
    "tls-source-needs-tls": (
        kubernetes_stack(tlsSecretName="triton-tls"),
        (),
        "tlsSecretName: has no effect with ingressTls: false; remove it or set ingressTls: true",
    ),
    "tls-needs-auth": (
        aws_stack(ingressAuth="none"),
        (),
        "ingressAuth: none leaves the public TLS endpoint open; use apiKey (TLS is on outside `local` "
        "unless ingressTls: false)",
    ),
    "auth-fits-the-edge": (
        aws_stack(ingressAuth="basic", ingressHtpasswd="user:$apr1$x"),
        SECRET_HTPASSWD,
        "ingressAuth: basic is an ingress-nginx annotation and does nothing on edge: gateway; use apiKey (keys the "
        "stack generates, sent as `Authorization: Bearer`) or set edge: ingress",
    ),
    "canary-needs-its-signals": (
        kubernetes_stack(canary=True, edge="ingress", existingAddons=PROMETHEUS),
        (),
        "canary: the weighted phase splits the model's traffic with Gateway API route weights; needs edge: gateway "
        "(on edge: ingress a new version is judged, then takes all traffic at once): set edge: gateway or "
        "canary: false",
    ),
    "api-clients-are-distinct": (
        aws_stack(apiClients=["webapp", "probe"]),
        (),
        "apiClients[1]: 'probe' is the integration probe's own key (always made); name the client otherwise",
    ),
    "api-keys-need-the-api-key-edge": (
        ingress_stack(apiClients=["webapp"]),
        (),
        "apiClients: no API key is made or checked with edge: ingress (clients get in with basic credentials, not a "
        "key): remove apiClients, or set edge: gateway with ingressAuth: apiKey",
    ),
    "gateway-edge-on-existing-cluster": (
        ingress_stack(edge="gateway", ingressAuth="apiKey", basicAuthSecretName=None, existingAddons=["envoy-gateway"]),
        (),
        "edge: gateway on an existing cluster needs the cluster's own Gateway: set gatewayName (and gatewayNamespace "
        "when it is in another namespace), or edge: ingress",
    ),
    "gateway-name-needs-gateway-edge": (
        ingress_stack(gatewayName="shared-edge"),
        (),
        "gatewayName: has no effect with edge: ingress; remove it or set edge: gateway",
    ),
    "oidc-needs-urls": (
        ingress_stack(ingressAuth="oidc", basicAuthSecretName=None, oidcAuthUrl="https://auth.example.com/oauth2/auth"),
        (),
        "ingressAuth: oidc needs both oidcAuthUrl and oidcSigninUrl",
    ),
    "oidc-urls-need-oidc": (
        ingress_stack(oidcSigninUrl="https://auth.example.com/oauth2/start"),
        (),
        "oidcSigninUrl: has no effect with ingressAuth basic; remove it or set ingressAuth: oidc",
    ),
    "basic-auth-needs-credentials": (
        ingress_stack(basicAuthSecretName=None),
        (),
        'ingressAuth: basic needs credentials: set the secret `pulumi config set --secret ingressHtpasswd "$(htpasswd '
        '-nb USER PASS)"` or basicAuthSecretName (an existing Secret), or use ingressAuth oidc/none',
    ),
    "one-basic-auth-source": (
        ingress_stack(ingressHtpasswd="user:$apr1$x"),
        SECRET_HTPASSWD,
        "basicAuthSecretName: give basicAuthSecretName (an existing Secret) or ingressHtpasswd, not both",
    ),
    "built-cluster-gateway-needs-implementation": (
        aws_stack(addons=["cert-manager"]),
        (),
        "addons: edge: gateway on the cluster this stack builds (platform aws) needs the implementation the stack "
        "installs: add `envoy-gateway` to `addons` (its Gateway, routes and API-key policy are Envoy Gateway's), or "
        "set edge: ingress",
    ),
    "built-cluster-issuer-is-made": (
        aws_stack(acmeEmail=None, tlsIssuer="letsencrypt-prod"),
        (),
        "tlsIssuer: 'letsencrypt-prod' names a ClusterIssuer nothing creates on the cluster this stack builds "
        "(platform aws): no certificate would ever be issued; set acmeEmail (the stack then makes it, on Let's "
        "Encrypt's production directory)",
    ),
    "built-cluster-basic-auth-secret-is-made": (
        aws_ingress_stack(ingressHtpasswd=None, basicAuthSecretName="triton-basic-auth"),
        (),
        "basicAuthSecretName: 'triton-basic-auth' names a Secret nothing creates on the cluster this stack builds "
        "(platform aws), which starts empty: every request would be refused; remove it and set the secret "
        "`ingressHtpasswd` (the stack makes the Secret), or use edge: gateway with ingressAuth: apiKey (keys the "
        "stack generates)",
    ),
    "built-cluster-gateway-certificates-are-issued": (
        aws_stack(acmeEmail=None),
        (),
        "acmeEmail: TLS on the Gateway this stack builds needs its listeners' certificates issued: set acmeEmail (the "
        "stack makes the ClusterIssuer and cert-manager issues each host's certificate), or ingressTls: false",
    ),
    "built-cluster-token-secret-is-made": (
        aws_stack(models=[dict(T5_SMALL, hfTokenSecret="hf-token")]),
        (),
        "models: models[0].hfTokenSecret: 'hf-token' names a Secret in namespace 'triton', which this same `up` "
        "creates on the cluster it builds (platform aws): nothing can make the Secret first, and the model's download "
        "Job would wait for it until its deadline; remove hfTokenSecret and set the stack's token, `pulumi config set "
        "--secret hfToken hf_...` (in CI: the HF_TOKEN repository secret, which .github/scripts/stack-config.sh "
        "sets): the stack makes the Secret the Job mounts from it",
    ),
    "gpu-fallback-types-same-gpus": (
        aws_stack(gpuFallbackInstanceTypes=["g6.12xlarge"]),
        (),
        "gpuFallbackInstanceTypes[0]: g6.12xlarge has 4 x L4, gpuInstanceType g5.12xlarge 4 x A10G: the models are "
        "sized and built for that GPU; use one of g5.24xlarge",
    ),
    "built-cluster-prod-api-access-is-stated": (
        aws_stack(environment="prod", protectStorage=True, adminPrincipalArns=[]),
        (),
        "adminPrincipalArns: prod's cluster would have a single admin, the identity that creates it (CI's deploy "
        "role): no operator could reach it with kubectl during an incident; list the operators' IAM roles (each gets "
        "AmazonEKSClusterAdminPolicy through an access entry), e.g. "
        "`[arn:aws:iam::123456789012:role/triton-ft-operators]`",
    ),
    "built-cluster-hosts-have-dns": (
        aws_stack(dnsZone="example.org"),
        (),
        "dnsZone: 'example.org' does not hold ingressHost 'test.triton.local': give the zone test.triton.local is in, "
        "or change ingressHost",
    ),
    "built-cluster-ingress-needs-controller": (
        aws_ingress_stack(addons=["cert-manager"]),
        SECRET_HTPASSWD,
        "addons: no ingress controller serves ingressClass 'nginx' on the cluster this stack builds (platform aws): "
        "every Ingress would stay without an address and the probe would time out; add `ingress-nginx` to `addons` "
        "(the controller this stack installs, under ingressClass, and whose annotations its Ingresses carry)",
    ),
    "built-cluster-tls-secret-is-created": (
        aws_ingress_stack(acmeEmail=None),
        SECRET_HTPASSWD,
        "ingressTls: TLS is on by default outside `local`, but without tlsIssuer the ingresses would use the Secret "
        "'triton-triton-tls', which nothing creates on the cluster this stack builds (platform aws): ingress-nginx "
        "would serve its self-signed fake certificate; set acmeEmail (the stack makes the ClusterIssuer `tlsIssuer`, "
        "with `cert-manager` in `addons`: cert-manager issues the certificate into the Secret the edge names) or "
        "ingressTls: false",
    ),
    "model-names-unique": (
        kubernetes_stack(models=[dict(T5_SMALL), dict(T5_SMALL)]),
        (),
        "models[1].name: 't5-small' is already used by models[0]; names must be unique",
    ),
    "model-hosts-are-dns-names": (
        kubernetes_stack(ingressHost=".".join(["a" * 61] * 4)),
        (),
        f"ingressHost: the host of models[0], 't5-small.{'a' * 31}'..., must be at most 253 characters (it has 256); "
        "shorten ingressHost",
    ),
    "family-matches-catalog": (
        kubernetes_stack(models=[model(family="gpt2")]),
        (),
        "models[0].family: 'gpt2' contradicts the catalog (google-t5/t5-small is t5); drop `family`",
    ),
    "unknown-repo-needs-architecture": (
        kubernetes_stack(models=[model(hfRepo="acme/t5-custom")]),
        (),
        "models[0].architecture: 'acme/t5-custom' is not in the catalog of known models; add `family` and an "
        "`architecture` block (dModel, numHeads, numLayers, dFf, vocabSize)",
    ),
    "architecture-needs-family": (
        kubernetes_stack(models=[model(hfRepo="acme/custom", architecture=ARCH)]),
        (),
        "models[0].family: required with a custom `architecture` (one of t5, gpt2, gptj, bert, llama)",
    ),
    "encoder-keys-for-encoders": (
        kubernetes_stack(models=[model(pooling="mean")]),
        (),
        "models[0].pooling: is an encoder setting (family bert); t5 is a generator: remove it",
    ),
    "generator-keys-for-generators": (
        kubernetes_stack(models=[dict(MINILM) | {"streaming": True}]),
        (),
        "models[0].streaming: is a generator setting, not for family bert: an encoder answers each request once, "
        "it does not stream: remove it",
    ),
    "cpu-for-encoders-only": (
        kubernetes_stack(models=[model(device="cpu")]),
        (),
        "models[0].device: cpu is for encoders (family bert); t5 runs on FasterTransformer, which needs GPUs",
    ),
    "task-keys-match-task": (
        kubernetes_stack(models=[dict(MINILM) | {"labels": ["negative", "positive"]}]),
        (),
        "models[0].labels: is for task classify; task embed answers a sentence embedding: remove it (or set "
        "task: classify)",
    ),
    "classify-needs-labels": (
        kubernetes_stack(models=[dict(SST2) | {"task": "classify"}]),
        (),
        "models[0].labels: is required with task classify: list the class names by logit index (id2label in the "
        "checkpoint's config.json), e.g. labels: [negative, positive]",
    ),
    "probe-labels-are-labels": (
        kubernetes_stack(models=[dict(SST2_CLASSIFIER) | {"probeLabels": {"I love it": "happy"}}]),
        (),
        "models[0].probeLabels: expects ['happy'], not among labels ['negative', 'positive']; use one of them",
    ),
    "encoder-length-fits-positions": (
        kubernetes_stack(models=[dict(MINILM) | {"maxSeqLength": 1024}]),
        (),
        "models[0].maxSeqLength: 1024 exceeds the model's 512 positions (architecture.maxPositions); use at most 512",
    ),
    "heads-divide-width": (
        kubernetes_stack(models=[model(hfRepo="acme/gpt", family="gpt2", architecture=ARCH | {"numHeads": 3})]),
        (),
        "models[0].architecture.numHeads: 3 does not divide dModel=256; give dKv or fix",
    ),
    "gated-repo-needs-token": (
        kubernetes_stack(gpusPerNode=2, models=[LLAMA8B | {"tensorParallel": 2}]),
        (),
        "hfToken: models[0] (meta-llama/Llama-3.1-8B-Instruct) is gated on the Hugging Face Hub: accept its licence "
        "there with an account, then store that account's token: `pulumi config set --secret hfToken hf_...` (in CI: "
        "the HF_TOKEN repository secret, which .github/scripts/stack-config.sh sets), or, on an existing cluster, "
        "name an existing Secret with key `token` in the model's `hfTokenSecret` (the download Job mounts it as a "
        "file; `tritonft preflight` checks it is there)",
    ),
    "vllm-block-for-llama": (
        kubernetes_stack(models=[model(vllm={"maxModelLen": 512})]),
        (),
        "models[0].vllm: is for family llama (served by vLLM); t5 is not: remove it",
    ),
    "ft-keys-not-for-llama": (
        kubernetes_stack(models=[QWEN7B | {"maxOutputLen": 256}]),
        (),
        "models[0].maxOutputLen: is a FasterTransformer setting, not for family llama: vLLM bounds prompt + answer "
        "together by `vllm.maxModelLen`; a request sets its own max_tokens",
    ),
    "vllm-engine-rules": (
        kubernetes_stack(models=[QWEN7B | {"vllm": {"gpuMemoryUtilization": 0.6}}]),
        (),
        "models[0].vllm: weights per GPU (14.19 GiB at bfloat16, TP 1) plus the KV cache of one 32768-token request "
        "(1.75 GiB) exceed gpuMemoryUtilization 0.6 of the GPU's 24 GiB (14.40 GiB; vllm "
        "v1/core/kv_cache_utils.py:854-880); raise tensorParallel or gpuMemoryUtilization, or lower maxModelLen",
    ),
    "tp-divides-heads": (
        kubernetes_stack(gpusPerNode=8, models=[dict(GPT2, tensorParallel=8)]),
        (),
        "models[0].tensorParallel: 8 does not divide numHeads=12 (use 1, 2, 4)",
    ),
    "tp-divides-ffn": (
        kubernetes_stack(
            gpusPerNode=2,
            models=[model(hfRepo="acme/gpt", family="gpt2", architecture=ARCH | {"dFf": 1023}, tensorParallel=2)],
        ),
        (),
        "models[0].tensorParallel: 2 does not divide the FFN size dFf=1023",
    ),
    "pp-divides-layers": (
        kubernetes_stack(gpusPerNode=8, models=[dict(GPT2, pipelineParallel=8)]),
        (),
        "models[0].pipelineParallel: 8 does not divide numLayers=12",
    ),
    "parallelism-fits-node": (
        aws_stack(gpuInstanceType="g5.2xlarge", models=[model(tensorParallel=2)]),
        (),
        "models[0].tensorParallel: 2 x pipelineParallel 1 = 2 GPUs, but a g5.2xlarge node has 1 A10G; use a larger "
        "node type or lower the parallelism",
    ),
    "bf16-needs-ampere": (
        kubernetes_stack(gpuType="T4", cudaArchs=["75"], models=[model(dataType="bf16")]),
        (),
        "models[0].dataType: bf16 needs an Ampere or newer GPU (sm >= 80), T4 is sm_75; use fp16 or fp32",
    ),
    "weights-fit-gpu-memory": (
        kubernetes_stack(
            gpuType="T4",
            cudaArchs=["75"],
            models=[{"name": "gpt-j", "hfRepo": "EleutherAI/gpt-j-6b", "revision": "0" * 40, "dataType": "fp32"}],
        ),
        (),
        "models[0].tensorParallel: weights need ~22.5 GiB per GPU at dataType fp32 and TP 1, over 80% of a T4's "
        "16 GiB; raise tensorParallel, use a 16-bit dataType or a larger GPU",
    ),
    "int8-gpt2-only": (
        kubernetes_stack(models=[model(int8Mode=1)]),
        (),
        "models[0].int8Mode: weight-only int8 is supported for gpt2 only, not t5",
    ),
    "ft-int8-needs-16-bit-compute": (
        kubernetes_stack(models=[dict(GPT2, int8Mode=1, dataType="fp32")]),
        (),
        "models[0].int8Mode: 1 with dataType fp32: FasterTransformer refuses weight-only int8 with fp32 compute at "
        'model load ("Weight only quant does not work with FP32 compute."); use dataType fp16 or bf16, or int8Mode: 0',
    ),
    "ft-int8-needs-sm70-to-sm89": (
        kubernetes_stack(gpuType="H100", models=[dict(GPT2, int8Mode=1)]),
        (),
        "models[0].int8Mode: 1 on H100 (sm_90): FasterTransformer's weight-only int8 GEMM runs on sm_70 to sm_89 "
        'only (it throws "Arch unsupported for CUTLASS mixed type GEMM"); use int8Mode: 0 or a V100/T4/A10G/L4/L40S/'
        "A100 GPU",
    ),
    "ft-head-size-has-kernel": (
        kubernetes_stack(models=[model(hfRepo="acme/gpt", family="gpt2", architecture=ARCH | {"dModel": 400})]),
        (),
        "models[0].architecture: head size 100 (dModel 400 / numHeads 4) has no FasterTransformer attention kernel; "
        "FT aborts at model load unless the head size is one of 32, 48, 64, 80, 96, 112, 128, 144, 160, 192, 224, 256",
    ),
    "ft-pp-divides-decoder-layers": (
        kubernetes_stack(
            gpusPerNode=2,
            models=[
                model(hfRepo="acme/t5", family="t5", architecture=ARCH | {"numDecoderLayers": 3}, pipelineParallel=2)
            ],
        ),
        (),
        "models[0].pipelineParallel: 2 does not divide the T5 decoder's numDecoderLayers=3 (FasterTransformer gives "
        "each pipeline stage the same number of decoder layers)",
    ),
    "preferred-batches-within-max": (
        kubernetes_stack(models=[model(maxBatchSize=8, preferredBatchSizes=[4, 16])]),
        (),
        "models[0].preferredBatchSizes: [16] must lie between 1 and maxBatchSize=8",
    ),
    "lengths-fit-positions": (
        kubernetes_stack(models=[dict(GPT2, maxInputLen=1000, maxOutputLen=128)]),
        (),
        "models[0].maxInputLen: 1000 + maxOutputLen 128 = 1128 tokens exceeds the model's 1024 positions; lower "
        "maxInputLen or maxOutputLen so they sum to at most 1024",
    ),
    "api-keys-name-clients": (
        aws_stack(apiClients=["webapp"], apiKeys={"batch": [{"name": "k2"}]}),
        (),
        "apiKeys.batch: 'batch' is not in apiClients (webapp): add it there, or remove it here",
    ),
    "global-rate-limit-needs-api-keys": (
        aws_ingress_stack(rateLimitRedis="limits.example.com:6379"),
        SECRET_HTPASSWD,
        "rateLimitRedis: the global limit counts the requests of each API key: it needs edge: gateway with "
        "ingressAuth: apiKey; remove rateLimitRedis, or use that edge",
    ),
    "eks-version-offered": (
        aws_stack(kubernetesVersion="1.29"),
        (),
        "kubernetesVersion: '1.29' is not a version this stack supports on EKS; use one of 1.32, 1.33, 1.34, 1.35, "
        "1.36",
    ),
    "charts-made-for-the-minor": (
        aws_stack(kubernetesVersion="1.32", eksSupport="extended"),
        (),
        "kubernetesVersion: 1.32 is not a minor the pinned cert-manager chart v1.21.1 is made for (1.33 to 1.36, per "
        "its end-to-end tests); set kubernetesVersion to 1.33, 1.34 or 1.35, or remove cert-manager from addons",
    ),
    "gpu-capacity": (
        aws_stack(
            gpuInstanceType="g5.xlarge", gpuNodesMin=1, gpuNodesDesired=1, gpuNodesMax=2, replicasMin=3, replicasMax=3
        ),
        (),
        "replicasMin: 3 x 1 (t5-small) = 3 GPUs need 3 g5.xlarge node(s) of 1 GPUs, but only gpuNodesMax 2 can "
        "exist; raise gpuNodesMin/gpuNodesMax to 3 or lower replicasMin",
    ),
    "cpu-model-fits-cpu-node": (
        aws_stack(systemInstanceType="m6i.large", models=[dict(MINILM) | {"device": "cpu", "instances": 2}]),
        (),
        "systemInstanceType: a m6i.large node (1.93 CPUs, 5.9 GiB allocatable) cannot hold one replica of "
        "models[0] 'minilm' on device cpu, which needs at least 3 CPUs (2 ONNX instance(s) + 1) and 1.3 GiB (2 x "
        "0.08 GiB of ONNX weights per instance + 1 GiB); use a larger systemInstanceType or fewer instances",
    ),
    "reference-job-fits-cpu-node": (
        aws_stack(systemInstanceType="m6i.2xlarge", models=[dict(GPTJ)]),
        (),
        "systemInstanceType: a m6i.2xlarge node (27.6 GiB left to pods beside its DaemonSets) cannot hold the judge "
        "reference Job of models[0] 'gpt-j-6b', which needs 29.9 GiB (every weight at fp32 on the CPU): it would "
        "stay Pending until its deadline; use a systemInstanceType with more memory (the r family has twice the m "
        "family's at the same vCPUs, e.g. r6i.2xlarge: 64 GiB)",
    ),
}
# warning-only rule id -> (stack, secret keys, one warning the stack loads with)
WARNING_CASES: dict[str, tuple[dict[str, Any], tuple[str, ...], str]] = {
    "api-key-expiry": (
        aws_stack(
            apiClients=["webapp"], apiKeys={"webapp": [{"name": "default", "expires": "2020-01-01"}, {"name": "k2"}]}
        ),
        (),
        "apiKeys.webapp[0].expires: key 'webapp' expired on 2020-01-01; this update removes it from the edge (its "
        "requests get 401): remove it from the stack file",
    ),
    "eks-warnings": (
        aws_stack(kubernetesVersion="1.33", eksSupport="extended"),
        (),
        "kubernetesVersion: 1.33 left EKS standard support on 2026-07-29: the control plane is billed as extended "
        "support ($0.60 instead of $0.10 an hour, ~$365 more a month) until 2027-07-29; upgrade one minor at a "
        "time towards 1.36",
    ),
    "judged-before-traffic": (
        aws_stack(
            models=[dict(GPT2, tensorParallel=4)],
            gpuNodesMin=1,
            gpuNodesDesired=1,
            gpuNodesMax=1,
        ),
        (),
        "gpuNodesMax: models[0] 'gpt2' has no room for a candidate beside its serving version (one more pod of 4 "
        "GPU(s) at replicasMax does not fit 1 node(s)): a change to what it serves rolls in place one pod at a time, "
        "each new pod taking traffic once ready, and is judged only after the roll (a wrong version fails `up` while "
        "it serves); gpuNodesMax 2 gives it room to be judged before it takes traffic",
    ),
}
RULE_KEYS = (
    {r.id: set(r.keys) for r in STACK_RULES}
    | {r.id: {f"models[].{k}" for k in r.keys} | set(r.stack_keys) for r in MODEL_RULES}
    | {r.id: set(r.keys) for r in PLAN_RULES}
)


RULE_KEYS_ALL = set().union(*RULE_KEYS.values())


def test_every_rule_has_a_case_and_every_case_a_rule() -> None:
    assert set(CASES) | set(WARNING_CASES) == set(RULE_KEYS)
    assert not set(CASES) & set(WARNING_CASES)


@pytest.mark.parametrize("rule_id", list(WARNING_CASES))
def test_warning_rule_loads_its_case_with_the_warning_a_user_gets(rule_id: str) -> None:
    values, secret_keys, warning = WARNING_CASES[rule_id]
    settings = load_settings(as_cli(values), project="triton-ft", stack="test", secret_keys=secret_keys)
    assert warning in settings.warnings
    assert bound_key(warning.split(": ", 1)[0]) <= RULE_KEYS[rule_id], "the warning names a key the rule binds"


def test_rule_ids_are_unique() -> None:
    ids = [r.id for r in STACK_RULES] + [r.id for r in MODEL_RULES] + [r.id for r in PLAN_RULES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("rule_id", list(CASES))
def test_rule_refuses_its_case_with_the_message_a_user_gets(rule_id: str) -> None:
    values, secret_keys, message = CASES[rule_id]
    problems = problems_of(values, secret_keys)
    assert problems == [message]
    assert bound_key(message.split(": ", 1)[0]) <= RULE_KEYS[rule_id], "the message names a key the rule binds"
    assert schema_path(message.split(": ", 1)[0]), "the message names a key of the schema"


def bound_key(path: str) -> set[str]:
    """``models[1].architecture.numHeads`` -> {``models[].architecture``, ``models``}; ``subnetIds[0]`` ->
    ``subnetIds``; ``apiKeys.webapp[0].expires`` -> ``apiKeys`` (a stack key holds no dot)."""
    entry = re.match(r"^models\[\d+\]\.(\w+)", path)
    if entry:
        return {f"models[].{entry.group(1)}"} & RULE_KEYS_ALL or {"models"}
    return {re.split(r"[\[.]", path, maxsplit=1)[0]}


FIXED_SIZE_GROUPS = {"systemNodesMin": 2, "systemNodesMax": 2, "gpuNodesMin": 1, "gpuNodesDesired": 1, "gpuNodesMax": 1}
"""Node groups that never grow: no cluster-autoscaler is installed."""


def test_keda_on_a_minor_its_compatibility_table_leaves_out_is_refused_naming_the_minors_that_fit() -> None:
    """KEDA 2.20 is tested on 1.33-1.35; 1.36 is offered by EKS and made for by cert-manager. Under eksSupport
    standard on the settings' date, 1.33 is in extended support: the minors that fit are 1.34 and 1.35."""
    problems = problems_of(aws_stack(kubernetesVersion="1.36", addons=[*AWS_ADDONS, "keda"], **FIXED_SIZE_GROUPS), ())
    assert problems == [
        "kubernetesVersion: 1.36 is not a minor the pinned keda chart 2.20.2 is made for (1.33 to 1.35, per KEDA's "
        "compatibility table); set kubernetesVersion to 1.34 or 1.35, or remove keda from addons"
    ]


def test_a_minor_without_a_pinned_cluster_autoscaler_is_refused_when_a_node_group_may_grow() -> None:
    """EKS offers 1.36 and every default chart is made for it, but no cluster-autoscaler chart of app 1.36 exists:
    refused by the settings, before the platform would refuse it inside `up`."""
    problems = problems_of(aws_stack(kubernetesVersion="1.36", gpuNodesMin=1, gpuNodesMax=2), ())
    assert problems == [
        "kubernetesVersion: 1.36 has no cluster-autoscaler release pinned (its minor must be the cluster's; pinned for "
        "1.32 to 1.35), and this stack's node groups may grow (systemNodesMin 1 < systemNodesMax 3, gpuNodesMin 1 < "
        "gpuNodesMax 2), which is cluster-autoscaler's job; set kubernetesVersion to 1.34 or 1.35, or make every node "
        "group fixed-size (each *NodesMax equal to its *NodesMin)"
    ]


def test_a_minor_without_a_pinned_cluster_autoscaler_is_accepted_with_fixed_size_node_groups() -> None:
    stack = aws_stack(kubernetesVersion="1.36", **FIXED_SIZE_GROUPS)
    settings = load_settings(as_cli(stack), project="triton-ft", stack="test")
    assert settings.cluster.aws is not None and settings.cluster.aws.kubernetes_version == "1.36"


def test_keda_on_the_default_minor_is_accepted() -> None:
    settings = load_settings(as_cli(aws_stack(addons=[*AWS_ADDONS, "keda"])), project="triton-ft", stack="test")
    assert "keda" in settings.cluster.addons


def test_the_issuer_the_stack_derives_from_acme_email_needs_cert_manager_too() -> None:
    """A new user's stack: `acmeEmail` (so a ClusterIssuer in its plan) without the `cert-manager` add-on."""
    problems = problems_of(aws_stack(addons=["envoy-gateway"]), ())
    assert problems == [
        "acmeEmail: the stack makes the ClusterIssuer 'letsencrypt-prod' from it, a cert-manager resource: add "
        "`cert-manager` to `addons` (cert-manager issues the edge's certificates from it)"
    ]


def test_canary_is_refused_with_a_vllm_model_naming_the_model_the_reason_and_the_fix() -> None:
    stack = aws_stack(canary=True, addons=[*aws_stack()["addons"], *PROMETHEUS], models=[dict(T5_SMALL), QWEN7B])
    assert problems_of(stack) == [
        "canary: models[1] 'qwen' is served by vLLM, whose phase could not fail it: Triton counts a request to a "
        "decoupled (vLLM) model as a success, and measures its latency, when the request is queued, so a candidate "
        "that errors or is slow would pass; set canary: false (every new version is still judged by the probe before "
        "it takes traffic), or serve this model from another stack"
    ]


def test_canary_with_generators_and_encoders_only_is_accepted() -> None:
    stack = aws_stack(canary=True, addons=[*aws_stack()["addons"], *PROMETHEUS], models=[dict(T5_SMALL), MINILM])
    settings = load_settings(as_cli(stack), project="triton-ft", stack="test")
    assert settings.serving.canary.enabled


def test_a_per_client_cap_is_refused_where_no_api_key_names_the_client() -> None:
    assert problems_of(kubernetes_stack(edge="ingress", maxConcurrentPerClient=8), ()) == [
        "maxConcurrentPerClient: no API key is made or checked with edge: ingress (anyone gets in, not a key): "
        "remove maxConcurrentPerClient, or set edge: gateway with ingressAuth: apiKey"
    ]


def test_a_llamas_reference_step_that_no_system_node_holds_is_refused_naming_its_vllm_job() -> None:
    problems = problems_of(aws_stack(systemInstanceType="m6i.2xlarge", models=[dict(QWEN7B)]), ())

    assert problems == [
        "systemInstanceType: a m6i.2xlarge node (27.6 GiB left to pods beside its DaemonSets) cannot hold the judge "
        "reference step (its vLLM Job) of models[0] 'qwen', which needs 38.5 GiB (every weight at fp32 on the "
        "CPU): it would stay Pending until its deadline; use a systemInstanceType with more memory (the r family has "
        "twice the m family's at the same vCPUs, e.g. r6i.2xlarge: 64 GiB)"
    ]

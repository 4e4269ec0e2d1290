"""The edge's one key-less exemption, held by the cluster: on a real kube-apiserver with the real Gateway API CRDs,
the plan's ValidatingAdmissionPolicy (``components.common.edge.public_route_admission_policy_spec``) refuses an
HTTPRoute labelled ``triton-ft.io/edge-auth: public`` that reaches anything but cert-manager's ACME solver, whether
the label comes with the route or is added to it later, and admits the two routes the stack means: the HTTPS
redirect and the solver's challenge route, the latter only from cert-manager's own service account (issue 51)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from components.common.edge import (
    ACME_CHALLENGE_PREFIX,
    ACME_SOLVER_PORT,
    ACME_SOLVER_SERVICE_PREFIX,
    AUTH_API_KEY,
    AUTH_LABEL,
    AUTH_PUBLIC,
    CERT_MANAGER_USER,
    PUBLIC_ROUTE_MESSAGE,
)
from components.common.triton import HTTP_PORT
from components.settings.stack_file import settings_from_stack_file
from tests.plans import StackPlans, deploy_secrets
from tests.system.controlplane.fixtures import Cluster
from tests.system.controlplane.plan import ADMISSION_KINDS, REAL_CRD_GROUPS, install_crds, load_plan, retarget
from tests.system.controlplane.server import REPO
from tritonft.kube import ApiError, Kube, wait_for

Objects = dict[str, Any]


def prod_objects(stack_plan: StackPlans, namespace: str) -> list[Objects]:
    plan = stack_plan("prod")  # an encoder's Triton has a route; the Gateway is the stack's own
    plan_namespace = settings_from_stack_file(REPO, "prod", deploy_secrets("prod")).namespace
    return retarget(load_plan(plan.out / "manifests"), plan_namespace, namespace)


def triton_route(objs: list[Objects]) -> Objects:
    """The encoder's HTTPRoute of the plan: Triton's inference paths, to Triton's Service."""
    (route,) = [
        o
        for o in objs
        if o["kind"] == "HTTPRoute"
        and any(b["port"] == HTTP_PORT for r in o["spec"]["rules"] for b in r.get("backendRefs", []))
    ]
    return copy.deepcopy(route)


def labelled(route: Objects, value: str) -> Objects:
    out = copy.deepcopy(route)
    out["metadata"].setdefault("labels", {})[AUTH_LABEL] = value
    return out


def solver_route(namespace: str, gateway: str, path: str = f"{ACME_CHALLENGE_PREFIX}tok3n") -> Objects:
    """The route cert-manager's HTTP-01 solver makes for a challenge (``pkg/issuer/acme/http/httproute.go``,
    ``generateHTTPRouteSpec``): the issuer's solver labels, one exact path to the challenge's solver Service, named
    with its namespace."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {
            "name": "cm-acme-http-solver-x7k2p",
            "namespace": namespace,
            "labels": {AUTH_LABEL: AUTH_PUBLIC, "acme.cert-manager.io/http01-solver": "true"},
        },
        "spec": {
            "parentRefs": [{"kind": "Gateway", "name": gateway, "sectionName": "http"}],
            "hostnames": ["example.com"],
            "rules": [
                {
                    "matches": [{"path": {"type": "Exact", "value": path}}],
                    "backendRefs": [
                        {
                            "group": "",
                            "kind": "Service",
                            "name": f"{ACME_SOLVER_SERVICE_PREFIX}x7k2p",
                            "namespace": namespace,
                            "port": ACME_SOLVER_PORT,
                            "weight": 1,
                        }
                    ],
                }
            ],
        },
    }


@pytest.fixture
def guarded(cluster: Cluster, stack_plan: StackPlans) -> list[Objects]:
    """The test's namespace with the plan's admission policy and binding in force; returns the plan's objects."""
    objs = prod_objects(stack_plan, cluster.namespace)
    cluster.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster.namespace}})
    install_crds(cluster.kube, (), REAL_CRD_GROUPS)
    admission = sorted((o for o in objs if o["kind"] in ADMISSION_KINDS), key=lambda o: o["kind"])
    assert [o["kind"] for o in admission] == list(ADMISSION_KINDS), "the plan holds one policy and its binding"
    for obj in admission:
        cluster.apply_cluster_scoped(obj)
    probe = labelled(triton_route(objs), AUTH_PUBLIC)

    def in_force() -> bool:  # the API server picks a new policy up from its informer, within a second or so
        try:
            cluster.kube.apply(probe, dry_run=True)
        except ApiError as exc:
            return PUBLIC_ROUTE_MESSAGE in exc.message
        return False

    wait_for("the public-route admission policy to be in force", in_force, 30)
    return objs


@pytest.fixture
def cert_manager(cluster: Cluster) -> Kube:
    """A client holding a token of cert-manager's controller's service account (:data:`CERT_MANAGER_USER`), allowed to
    write HTTPRoutes in the test's namespace, as cert-manager's chart allows its controller."""
    namespace, account = CERT_MANAGER_USER.removeprefix("system:serviceaccount:").split(":")
    kube = cluster.kube
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    kube.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": namespace}})
    rbac = "rbac.authorization.k8s.io/v1"
    kube.apply(
        {
            "apiVersion": rbac,
            "kind": "Role",
            "metadata": {"name": "solver-routes", "namespace": cluster.namespace},
            "rules": [
                {
                    "apiGroups": ["gateway.networking.k8s.io"],
                    "resources": ["httproutes"],
                    "verbs": ["get", "list", "create", "update", "patch"],
                }
            ],
        }
    )
    kube.apply(
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": {"name": "solver-routes", "namespace": cluster.namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "solver-routes"},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        }
    )
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    answer = kube.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token", body=request)
    client = Kube(kube.server, token=answer["status"]["token"])

    def allowed() -> bool:  # RBAC's informer picks the binding up within a second or so
        try:
            client.request("GET", f"/apis/gateway.networking.k8s.io/v1/namespaces/{cluster.namespace}/httproutes")
        except ApiError as exc:
            if exc.status != 403:
                raise
            return False
        return True

    wait_for("cert-manager's role to be in force", allowed, 30)
    return client


def refusal(apply: Callable[[], Any]) -> str:
    with pytest.raises(ApiError) as refused:
        apply()
    return refused.value.message


def test_a_route_to_triton_labelled_public_is_refused_with_the_policys_message(
    cluster: Cluster, guarded: list[Objects]
) -> None:
    route = labelled(triton_route(guarded), AUTH_PUBLIC)
    message = refusal(lambda: cluster.kube.apply(route))
    assert PUBLIC_ROUTE_MESSAGE in message
    assert route["metadata"]["name"] in message, "the API server names the route it refused"


def test_the_public_label_added_later_to_a_route_to_triton_is_refused(cluster: Cluster, guarded: list[Objects]) -> None:
    route = triton_route(guarded)
    assert route["metadata"]["labels"][AUTH_LABEL] == AUTH_API_KEY
    cluster.kube.apply(route)  # as the plan makes it: admitted
    message = refusal(lambda: cluster.kube.apply(labelled(route, AUTH_PUBLIC)))
    assert PUBLIC_ROUTE_MESSAGE in message
    stored = cluster.kube.get(route["apiVersion"], "HTTPRoute", route["metadata"]["name"], cluster.namespace)
    assert stored["metadata"]["labels"][AUTH_LABEL] == AUTH_API_KEY, "the stored route keeps its key"


def test_the_https_redirect_of_the_plan_is_admitted_with_the_public_label(
    cluster: Cluster, guarded: list[Objects]
) -> None:
    (redirect,) = [o for o in guarded if o["kind"] == "HTTPRoute" and o["metadata"]["name"].endswith("https-redirect")]
    assert redirect["metadata"]["labels"][AUTH_LABEL] == AUTH_PUBLIC
    assert cluster.kube.apply(redirect)["metadata"]["uid"]


def test_cert_managers_acme_solver_route_is_admitted_with_the_public_label(
    cluster: Cluster, guarded: list[Objects], cert_manager: Kube
) -> None:
    gateway = triton_route(guarded)["spec"]["parentRefs"][0]["name"]
    assert cert_manager.apply(solver_route(cluster.namespace, gateway))["metadata"]["uid"]


def test_the_solvers_route_made_by_anyone_but_cert_manager_is_refused(cluster: Cluster, guarded: list[Objects]) -> None:
    """Whoever may write Services and routes in the namespace could name a Service ``cm-acme-http-solver-*`` with
    port 8089 and point it at any pod: the shape alone is no proof, the author is."""
    gateway = triton_route(guarded)["spec"]["parentRefs"][0]["name"]
    message = refusal(lambda: cluster.kube.apply(solver_route(cluster.namespace, gateway)))
    assert PUBLIC_ROUTE_MESSAGE in message


def test_anyone_may_annotate_the_solvers_route_but_not_change_its_rules(
    cluster: Cluster, guarded: list[Objects], cert_manager: Kube
) -> None:
    """The garbage collector and Envoy Gateway write routes too; they never change what the exemption reads."""
    gateway = triton_route(guarded)["spec"]["parentRefs"][0]["name"]
    route = solver_route(cluster.namespace, gateway)
    cert_manager.apply(route)
    annotated = copy.deepcopy(route)
    annotated["metadata"]["annotations"] = {"example.com/seen": "yes"}
    assert cluster.kube.apply(annotated)["metadata"]["annotations"] == {"example.com/seen": "yes"}
    widened = solver_route(cluster.namespace, gateway, path=f"{ACME_CHALLENGE_PREFIX}other")
    assert PUBLIC_ROUTE_MESSAGE in refusal(lambda: cluster.kube.apply(widened))


def forged(objs: list[Objects], namespace: str) -> dict[str, Objects]:
    """Public routes shaped like the two the stack means, each with one thing that reaches further."""
    gateway = triton_route(objs)["spec"]["parentRefs"][0]["name"]
    (redirect,) = [o for o in objs if o["kind"] == "HTTPRoute" and o["metadata"]["name"].endswith("https-redirect")]
    mirror = copy.deepcopy(redirect)
    triton = triton_route(objs)["spec"]["rules"][0]["backendRefs"][0]
    mirror["spec"]["rules"][0]["filters"] = [  # no backendRefs still, but a copy of each request to Triton
        {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": triton["name"], "port": triton["port"]}}}
    ]
    whole_host = solver_route(namespace, gateway)
    whole_host["spec"]["rules"][0]["matches"] = [{"path": {"type": "PathPrefix", "value": "/"}}]
    other_port = solver_route(namespace, gateway)
    other_port["spec"]["rules"][0]["backendRefs"][0]["port"] = 8000
    elsewhere = solver_route(namespace, gateway)
    elsewhere["spec"]["rules"][0]["backendRefs"][0]["namespace"] = "kube-system"
    redirects = {}
    for field, value in (
        ("hostname", "elsewhere.example.com"),  # an open redirect on the stack's host, published without a key
        ("path", {"type": "ReplaceFullPath", "replaceFullPath": "/phish"}),
        ("port", 8443),
    ):
        open_redirect = copy.deepcopy(redirect)
        open_redirect["spec"]["rules"][0]["filters"][0]["requestRedirect"][field] = value
        redirects[f"redirect-with-a-{field}"] = open_redirect
    plain_http = copy.deepcopy(redirect)
    plain_http["spec"]["rules"][0]["filters"][0]["requestRedirect"]["scheme"] = "http"
    return {
        **redirects,
        "redirect-to-plain-http": plain_http,
        "no-backend-but-a-mirror": mirror,
        "solver-on-every-path": whole_host,
        "solver-on-another-port": other_port,
        "solver-in-another-namespace": elsewhere,
    }


@pytest.mark.parametrize(
    "shape",
    [
        "redirect-with-a-hostname",
        "redirect-with-a-path",
        "redirect-with-a-port",
        "redirect-to-plain-http",
        "no-backend-but-a-mirror",
        "solver-on-every-path",
        "solver-on-another-port",
        "solver-in-another-namespace",
    ],
)
def test_a_public_route_that_reaches_further_than_the_stack_means_is_refused(
    cluster: Cluster, guarded: list[Objects], cert_manager: Kube, shape: str
) -> None:
    """Refused even from cert-manager's own account: the shape is checked whoever sends it."""
    route = forged(guarded, cluster.namespace)[shape]
    assert PUBLIC_ROUTE_MESSAGE in refusal(lambda: cert_manager.apply(route, dry_run=True))

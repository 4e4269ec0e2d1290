"""Stand-ins for what the deploy workflow's jobs call that cannot run here: `docker` (BuildKit and the registry),
`aws ecr` (the registry's API: an image's manifest, a tag added to it), `df`, `pulumi` (the CLI and the engine: `up` is
the stack's synthesized plan) and `tritonft probe` (the edge).

Each is a command on the rehearsal's ``PATH`` (``python -m tests.delivery.standins <name> ...``), with its state in
``$REHEARSAL_STATE``. They stand in for the cloud, never for the project's own code: the workflow's scripts, the
build plan, the settings, the program and the policy pack run for real. What each one checks is what the real
thing would refuse or hang on (see :mod:`tests.delivery.test_rehearsal`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

STATE = Path(os.environ.get("REHEARSAL_STATE", "."))
POD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet", "Pod"}


def _load(name: str, default: Any) -> Any:
    path = STATE / name
    return json.loads(path.read_text()) if path.exists() else default


def _save(name: str, data: Any) -> None:
    (STATE / name).write_text(json.dumps(data, indent=1, sort_keys=True))


def _fail(message: str) -> int:
    print(message, file=sys.stderr)
    return 1


# --- docker: BuildKit + the registry ----------------------------------------------------------------------------


def _build_args(argv: list[str]) -> tuple[dict[str, str], dict[str, list[str]], str]:
    args: dict[str, str] = {}
    flags: dict[str, list[str]] = {}
    i, positional = 0, []
    while i < len(argv):
        arg = argv[i]
        if arg == "--build-arg":
            key, _, value = argv[i + 1].partition("=")
            args[key] = value
            i += 2
        elif arg.startswith("--") and "=" in arg:
            flag, _, value = arg.partition("=")
            flags.setdefault(flag, []).append(value)
            i += 1
        elif arg.startswith("--") and arg not in ("--push", "--pull", "--load") and i + 1 < len(argv):
            flags.setdefault(arg, []).append(argv[i + 1])
            i += 2
        elif arg.startswith("--"):
            flags.setdefault(arg, []).append("")
            i += 1
        else:
            positional.append(arg)
            i += 1
    return args, flags, positional[-1]


def dockerfile_guard(dockerfile: str, args: dict[str, str]) -> str | None:
    """Run the Dockerfile's own base-pinning guard (its `RUN case "${REQUIRE_PINNED_BASE}..." esac`) with the build's
    arguments and the ARG defaults, as BuildKit would: the message it stops with, or None."""
    text = Path(dockerfile).read_text().replace("\\\n", " ")
    scope: dict[str, str] = {}
    for line in text.splitlines():
        if match := re.match(r"^ARG\s+([A-Za-z_]\w*)(?:=(.*))?$", line.strip()):
            name, default = match.group(1), match.group(2)
            if name not in scope:
                value = (default or "").strip().strip('"')
                scope[name] = args.get(name, re.sub(r"\$\{(\w+)\}", lambda m: scope.get(m.group(1), ""), value))
        elif line.strip().startswith("RUN ") and "REQUIRE_PINNED_BASE" in line:
            proc = subprocess.run(
                ["bash", "-c", line.strip()[4:]],
                env={**scope, "PATH": os.environ["PATH"]},
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                return proc.stderr.strip() or f"the guard of {dockerfile} failed"
    return None


def docker(argv: list[str]) -> int:
    registry: dict[str, str] = _load("registry.json", {})
    builds: list[dict[str, Any]] = _load("builds.json", [])
    if argv[:3] == ["buildx", "imagetools", "inspect"]:
        ref = argv[3]
        if ref not in registry:
            return _fail(f"ERROR: {ref}: not found")
        print(json.dumps({"digest": registry[ref], "mediaType": "application/vnd.oci.image.index.v1+json"}))
        return 0
    if argv[:2] == ["buildx", "prune"]:
        return 0
    if argv[:2] != ["buildx", "build"]:
        return _fail(f"stand-in docker: unexpected {argv}")
    args, flags, context = _build_args(argv[2:])
    dockerfile = flags["--file"][0]
    if (message := dockerfile_guard(dockerfile, args)) is not None:
        return _fail(message)
    for value in args.values():
        if "@sha256:" in value and value not in registry.values() and value.split("@", 1)[1] not in registry.values():
            return _fail(f"ERROR: failed to resolve source metadata for {value}: not found")
    tags = flags.get("--tag", [])
    for tag in tags:
        if tag in registry:
            return _fail(f"tag invalid: The image tag '{tag}' already exists and cannot be overwritten (IMMUTABLE)")
    digest = "sha256:" + hashlib.sha256(json.dumps([dockerfile, sorted(args.items())]).encode()).hexdigest()
    if "--push" in flags:  # without it the image stays in the builder: no registry (nor node) ever sees it
        for tag in tags:
            registry[tag] = digest
    builds.append({"dockerfile": dockerfile, "context": context, "args": args, "flags": flags, "digest": digest})
    if "--metadata-file" in flags:
        Path(flags["--metadata-file"][0]).write_text(json.dumps({"containerimage.digest": digest}))
    _save("registry.json", registry)
    _save("builds.json", builds)
    return 0


def df(argv: list[str]) -> int:
    avail = int(os.environ.get("REHEARSAL_DISK_KB", str(150 * 1024 * 1024)))
    print("Filesystem     1024-blocks      Used Available Capacity Mounted on")
    print(f"/dev/root       {avail * 2} {avail} {avail} 50% {argv[-1]}")
    return 0


# --- aws ecr: the registry's API ----------------------------------------------------------------------------------


def _manifest(digest: str) -> str:
    return json.dumps({"schemaVersion": 2, "config": {"digest": digest}})


def aws(argv: list[str]) -> int:
    """``aws ecr batch-get-image`` (an image's manifest, by digest) and ``aws ecr put-image`` (a tag added to it;
    IMMUTABLE: a tag holding another digest is refused), on the stand-in registry (``repository:tag`` -> digest)."""
    registry: dict[str, str] = _load("registry.json", {})
    calls: list[list[str]] = _load("aws-calls.json", [])
    calls.append(argv)
    _save("aws-calls.json", calls)
    if argv[:1] != ["ecr"] or len(argv) < 2:
        return _fail(f"stand-in aws: unexpected {argv}")
    region, account, name = (
        _option(argv, "--region"),
        _option(argv, "--registry-id"),
        _option(argv, "--repository-name"),
    )
    if not (region and account and name):
        return _fail("aws: error: --region, --registry-id and --repository-name are required here")
    repository = f"{account}.dkr.ecr.{region}.amazonaws.com/{name}"
    held = {digest for tag, digest in registry.items() if tag.rsplit(":", 1)[0] == repository}
    if argv[1] == "batch-get-image":
        digest = (_option(argv, "--image-ids") or "").removeprefix("imageDigest=")
        if digest not in held:
            print(
                json.dumps(
                    {"images": [], "failures": [{"failureCode": "ImageNotFound", "imageId": {"imageDigest": digest}}]}
                )
            )
            return 0
        media = "application/vnd.oci.image.manifest.v1+json"
        image = {
            "imageId": {"imageDigest": digest},
            "imageManifest": _manifest(digest),
            "imageManifestMediaType": media,
        }
        print(json.dumps({"images": [image], "failures": []}))
        return 0
    if argv[1] == "put-image":
        tag, digest = _option(argv, "--image-tag") or "", _option(argv, "--image-digest") or ""
        if digest not in held or _option(argv, "--image-manifest") != _manifest(digest):
            return _fail(f"An error occurred (InvalidParameterException): manifest does not match {digest}")
        existing = registry.get(f"{repository}:{tag}")
        if existing == digest:
            return _fail("An error occurred (ImageAlreadyExistsException): the image has already been pushed")
        if existing is not None:
            return _fail(f"An error occurred (ImageTagAlreadyExistsException): tag {tag} is immutable")
        registry[f"{repository}:{tag}"] = digest
        _save("registry.json", registry)
        print(json.dumps({"image": {"imageId": {"imageDigest": digest, "imageTag": tag}}}))
        return 0
    return _fail(f"stand-in aws: unexpected {argv}")


# --- pulumi: the CLI's config/outputs, and `up` as the synthesized plan -----------------------------------------


def _short(stack: str) -> str:
    return stack.rsplit("/", 1)[-1]


def _option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def _config_set(argv: list[str]) -> int:
    stack = _short(_option(argv, "--stack") or "")
    rest = [a for i, a in enumerate(argv) if not a.startswith("--") and (i == 0 or argv[i - 1] != "--stack")]
    key, value = rest[0], (rest[1] if len(rest) > 1 else sys.stdin.read())
    path = Path("stacks") / f"Pulumi.{stack}.yaml"
    data = yaml.safe_load(path.read_text()) if path.exists() else {}
    config = data.setdefault("config", {})
    stored: Any = {"secure": "v1:" + base64.b64encode(b"rehearsal").decode()} if "--secret" in argv else value
    if "--path" in argv:
        head, *parts = key.split(".")
        node = config.setdefault(head, {})
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = stored
    else:
        config[key] = stored
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return 0


def pod_specs(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    spec = manifest.get("spec") or {}
    if manifest.get("kind") == "Pod":
        return [spec]
    if manifest.get("kind") == "CronJob":
        return [spec["jobTemplate"]["spec"]["template"]["spec"]]
    template = spec.get("template", {}).get("spec")
    return [template] if manifest.get("kind") in POD_KINDS and template else []


def pod_references(pod: dict[str, Any]) -> set[tuple[str, str]]:
    """(kind, name) of each object a pod cannot start without: the Secrets and ConfigMaps of its non-optional
    volumes (projected ones too), env and envFrom references and pull secrets (the kubelet waits for them in
    ContainerCreating), its claims (the scheduler leaves it Pending), its ServiceAccount and PriorityClass (the API
    server refuses the pod)."""
    refs: set[tuple[str, str]] = {("ServiceAccount", pod.get("serviceAccountName") or "default")}
    if pod.get("priorityClassName"):
        refs.add(("PriorityClass", pod["priorityClassName"]))
    refs |= {("Secret", s["name"]) for s in pod.get("imagePullSecrets", [])}
    for volume in pod.get("volumes", []):
        if "secret" in volume and not volume["secret"].get("optional"):
            refs.add(("Secret", volume["secret"]["secretName"]))
        if "configMap" in volume and not volume["configMap"].get("optional"):
            refs.add(("ConfigMap", volume["configMap"]["name"]))
        if "persistentVolumeClaim" in volume:
            refs.add(("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"]))
        for source in (volume.get("projected") or {}).get("sources", []):
            for key, kind in (("secret", "Secret"), ("configMap", "ConfigMap")):
                if key in source and not source[key].get("optional"):
                    refs.add((kind, source[key]["name"]))
    for container in [*pod.get("initContainers", []), *pod.get("containers", [])]:
        for env in container.get("env", []):
            for key, kind in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
                ref = (env.get("valueFrom") or {}).get(key)
                if ref and not ref.get("optional"):
                    refs.add((kind, ref["name"]))
        for source in container.get("envFrom", []):
            for key, kind in (("secretRef", "Secret"), ("configMapRef", "ConfigMap")):
                ref = source.get(key)
                if ref and not ref.get("optional"):
                    refs.add((kind, ref["name"]))
    return refs


def secret_refs(pod: dict[str, Any]) -> set[str]:
    """The Secrets a pod cannot start without (a non-optional volume, env or envFrom reference, a pull secret)."""
    return {name for kind, name in pod_references(pod) if kind == "Secret"}


def image_resolves(image: str, registry: dict[str, str]) -> bool:
    """Whether the stand-in registry (tag -> digest) holds ``image`` (``repository@sha256:...`` or
    ``repository:tag``), as the kubelet's pull would need."""
    repository, _, digest = image.partition("@")
    if digest:
        return any(tag.rsplit(":", 1)[0] == repository and held == digest for tag, held in registry.items())
    return image in registry


def plan_problems(
    plan: Path, session_seconds: int, before_up_minutes: int = 0, up_step_minutes: int = 360
) -> list[str]:
    """What would stop or hang this `up` in the cloud, read from its plan: a Secret nothing creates, `up`'s step
    timeout (``up_step_minutes``) shorter than the plan's longest `up`, an AWS session that ends before it (the steps
    before `up` may take ``before_up_minutes``)."""
    from tritonft.synth.budget import up_budget_minutes
    from tritonft.synth.plandiff import load_plan

    problems: list[str] = []
    manifests = [yaml.safe_load(p.read_text()) for p in sorted((plan / "manifests").rglob("*.yaml"))]
    created = {(m["metadata"].get("namespace"), m["metadata"]["name"]) for m in manifests if m.get("kind") == "Secret"}
    for manifest in manifests:
        namespace = manifest["metadata"].get("namespace")
        for pod in pod_specs(manifest):
            for name in sorted(secret_refs(pod) - {n for ns, n in created if ns == namespace}):
                problems.append(
                    f"{manifest['kind']} {namespace}/{manifest['metadata']['name']} waits in ContainerCreating: "
                    f"Secret {name} is created by nothing in the stack"
                )
    budget = up_budget_minutes(load_plan(plan))
    if up_step_minutes < budget:
        problems.append(
            f"the `up` step's timeout-minutes {up_step_minutes} stops a healthy `up`: it may run {budget} min "
            "along its dependencies"
        )
    if session_seconds < (before_up_minutes + budget) * 60:
        problems.append(
            f"the job's AWS session ends at minute {session_seconds // 60}; `up` may run {budget} min along its "
            f"dependencies after {before_up_minutes} min of steps: it would fail mid-`up` with expired credentials, "
            "the stack locked"
        )
    return problems


def _up(argv: list[str]) -> int:
    stack = _option(argv, "--stack") or ""
    short = _short(stack)
    plan = STATE / "plans" / short
    proc = subprocess.run(
        [sys.executable, "-m", "tritonft.cli", "synth", "--stack", short, "--out", str(plan)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return _fail(proc.stdout + proc.stderr)
    if (pack := _option(argv, "--policy-pack")) is not None:
        check = subprocess.run(
            [sys.executable, "-m", f"{pack}.synth_check", str(plan)], capture_output=True, text=True, check=False
        )
        if check.returncode != 0:
            return _fail(f"policy pack: {check.stdout}{check.stderr}")
    resources = json.loads((plan / "resources.json").read_text())
    ups: dict[str, Any] = _load("ups.json", {})
    builds = [r for r in resources if r["type"] == "docker-build:index:Image"]
    ups[short] = {"built": [r["name"] for r in builds]}
    _save("ups.json", ups)
    for build in builds:  # the docker-build provider runs each build inside `up`
        inputs = build["inputs"]
        argv_build = ["buildx", "build", "--file", inputs["dockerfile"]["location"]]
        for key, value in inputs.get("buildArgs", {}).items():
            argv_build += ["--build-arg", f"{key}={value}"]
        push = ["--push"] if inputs.get("push") else []
        if docker([*argv_build, *push, "--tag", f"{inputs['tags'][0]}", inputs["context"]["location"]]) != 0:
            return _fail(f"error: docker-build:index:Image {build['name']}: the build inside `up` failed")
    if os.environ.get("REHEARSAL_KUBECONFIG"):
        problems = _up_on_cluster(plan, short)
        if problems:
            return _fail("\n".join(f"error: {p}" for p in problems))
    session = int(os.environ.get("REHEARSAL_AWS_SESSION_SECONDS", "0"))
    problems = plan_problems(
        plan,
        session,
        before_up_minutes=int(os.environ.get("REHEARSAL_BEFORE_UP_MINUTES", "0")),
        up_step_minutes=int(os.environ.get("REHEARSAL_UP_STEP_MINUTES", "360")),
    )
    if problems:
        return _fail("\n".join(f"error: {p}" for p in problems))
    outputs = json.loads((plan / "outputs.json").read_text())
    keys = [r["name"] for r in resources if r["type"] == "random:index/randomPassword:RandomPassword"]
    clients = [m.group(1) for k in keys if (m := re.search(r"-edge-apikey-(.+)-random$", k))]
    secrets = {"apiKeys": {client: f"sk-rehearsal-{short}-{client}" for client in clients}}
    stacks: dict[str, Any] = _load("outputs.json", {})
    stacks[short] = {"outputs": outputs, "secrets": secrets}
    _save("outputs.json", stacks)
    print(f"stand-in up {stack}: {len(resources)} resources")
    return 0


def _up_on_cluster(plan: Path, stage: str) -> list[str]:
    """The Kubernetes half on the rehearsal's control plane (:mod:`tests.delivery.cluster_half`), recorded in
    ``cluster.json``."""
    from components.settings.stack_file import settings_from_stack_file
    from tests.delivery.cluster_half import up_on_cluster
    from tritonft.kube import from_kubeconfig

    kube = from_kubeconfig(os.environ["REHEARSAL_KUBECONFIG"])
    settings = settings_from_stack_file(Path.cwd(), stage)
    problems, record = up_on_cluster(
        kube,
        plan,
        settings,
        stage=stage,
        prefix=os.environ["REHEARSAL_CLUSTER"],
        registry=_load("registry.json", {}),
        ours=os.environ["REHEARSAL_IMAGE_REGISTRY"],
    )
    clusters: dict[str, Any] = _load("cluster.json", {})
    clusters[stage] = {**record, "problems": problems, "order": len(clusters)}
    _save("cluster.json", clusters)
    return problems


def _output(argv: list[str]) -> int:
    stack = _short(_option(argv, "--stack") or "")
    state = _load("outputs.json", {}).get(stack)
    if state is None:
        return _fail(f"error: no stack named '{stack}' has been updated")
    names = [a for i, a in enumerate(argv) if not a.startswith("--") and argv[i - 1] != "--stack" and a != "output"]
    outputs = dict(state["outputs"])
    if "--show-secrets" in argv:
        outputs.update(state["secrets"])
    if names:
        if names[0] not in outputs:
            return _fail(f"error: current stack does not have output property '{names[0]}'")
        print(json.dumps(outputs[names[0]]))
    else:
        print(json.dumps(outputs))
    return 0


def pulumi(argv: list[str]) -> int:
    calls: list[list[str]] = _load("pulumi-calls.json", [])
    calls.append(argv)
    _save("pulumi-calls.json", calls)
    if argv[:2] == ["stack", "select"] or argv[:3] == ["config", "env", "add"] or argv[:1] == ["cancel"]:
        return 0
    if argv[:2] == ["config", "set"]:
        return _config_set(argv[2:])
    if argv[:2] == ["stack", "output"]:
        return _output(argv[1:])
    if argv[:1] == ["up"]:
        return _up(argv[1:])
    return _fail(f"stand-in pulumi: unexpected {argv}")


# --- tritonft probe: the edge ------------------------------------------------------------------------------------


def tritonft(argv: list[str]) -> int:
    """The edge in front of every model: it answers only a request with a key the stack issued."""
    if argv[:1] != ["probe"]:
        return _fail(f"stand-in tritonft: unexpected {argv}")
    url, specs = _option(argv, "--url"), [argv[i + 1] for i, a in enumerate(argv) if a == "--spec"]
    headers = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--header-from-env")
    issued = {
        f"Bearer {key}"
        for state in _load("outputs.json", {}).values()
        for key in state["secrets"].get("apiKeys", {}).values()
    }
    authorization = os.environ.get(headers.get("Authorization", ""), "")
    if authorization not in issued:
        return _fail(f"probe: {url}: HTTP 401 Unauthorized (the edge requires an API key)")
    gateway = _option(argv, "--gateway")
    target = url or gateway  # without --url: a model judged through the OpenAI gateway alone
    if not target or not target.startswith("https://"):
        return _fail(f"probe: {target!r} is not an endpoint of the stack")
    from tritonft.spec import ModelSpec

    models = [ModelSpec.from_json(Path(s).read_text()).name for s in specs]
    probes: list[dict[str, Any]] = _load("probes.json", [])
    probes.append({"url": url, "models": models, "gateway": gateway})
    _save("probes.json", probes)
    return 0


COMMANDS = {"aws": aws, "docker": docker, "df": df, "pulumi": pulumi, "tritonft": tritonft}

if __name__ == "__main__":
    sys.exit(COMMANDS[sys.argv[1]](sys.argv[2:]))

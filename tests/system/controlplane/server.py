"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, and
kwok simulating the kubelets of nodes the tests create (pod IPs from 192.0.2.0/24, a documentation range).

Binaries come from ``scripts/setup/control_plane.sh`` (built once from the Go module proxy, cached). Every process
binds 127.0.0.1 on a free port, runs in its own process group, logs to a file the fixture attaches on failure, and
is stopped by its PID.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tritonft.kube import ApiError, Kube

REPO = Path(__file__).resolve().parents[3]
POD_CIDR = "192.0.2.0/24"
NODE_IP = "127.0.0.1"
"""The simulated kubelets' address: the API server's calls to a kubelet (a pod's log) are refused at once on loopback
(nothing listens on 10250), where a documentation-range address is dropped on some networks and each call waited
~30 s for its dial to time out (seen: every rollout that read its pods' Triton logs took minutes)."""
SERVICE_CIDR = "10.96.0.0/16"


def control_plane_bin() -> Path:
    """Build (once) or find the binaries; the script prints their directory."""
    out = subprocess.run(
        ["bash", str(REPO / "scripts/setup/control_plane.sh")], check=True, capture_output=True, text=True
    )
    return Path(out.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class ControlPlane:
    """The running processes, their logs and a client with cluster-admin rights."""

    workdir: Path
    bin_dir: Path
    kube: Kube = field(init=False)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    started_s: float = 0.0

    def logs(self) -> dict[str, Path]:
        return {name: self.workdir / f"{name}.log" for name in self.procs}

    def _spawn(self, name: str, args: list[str]) -> None:
        log = (self.workdir / f"{name}.log").open("wb")
        self.procs[name] = subprocess.Popen(
            [str(self.bin_dir / args[0]), *args[1:]],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # own process group: stopped by PID, never by name
        )

    def start(self, timeout_s: float = 120.0) -> None:
        t0 = time.monotonic()
        work = self.workdir
        token = secrets.token_hex(16)
        (work / "tokens.csv").write_text(f'{token},admin,admin,"system:masters"\n')
        key, pub = work / "sa.key", work / "sa.pub"
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
        subprocess.run(
            ["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(pub)], check=True, capture_output=True
        )
        etcd_port, peer_port, api_port, kwok_port = free_port(), free_port(), free_port(), free_port()
        server = f"https://127.0.0.1:{api_port}"
        kubeconfig = work / "kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "cp", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
                    "users": [{"name": "admin", "user": {"token": token}}],
                    "contexts": [{"name": "cp", "context": {"cluster": "cp", "user": "admin"}}],
                    "current-context": "cp",
                }
            )
        )
        self._spawn(
            "etcd",
            [
                "etcd",
                f"--data-dir={work / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        self._spawn(
            "kube-apiserver",
            [
                "kube-apiserver",
                f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={api_port}",
                f"--cert-dir={work / 'certs'}",
                f"--token-auth-file={work / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pub}",
                f"--service-account-signing-key-file={key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                "--enable-priority-and-fairness=false",
                "--endpoint-reconciler-type=none",  # a loopback address is no valid endpoint of the kubernetes Service
                "--v=1",
            ],
        )
        self.kube = Kube(server, token=token)
        self._wait("kube-apiserver to be ready", self.kube.healthy, t0 + timeout_s)
        common = [f"--kubeconfig={kubeconfig}", "--leader-elect=false", "--secure-port=0", "--v=1"]
        self._spawn(
            "kube-controller-manager",
            [
                "kube-controller-manager",
                *common,
                f"--service-account-private-key-file={key}",
                "--use-service-account-credentials=false",
                "--horizontal-pod-autoscaler-sync-period=2s",
                "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller",
            ],
        )
        self._spawn("kube-scheduler", ["kube-scheduler", *common])
        self._spawn(
            "kwok",
            [
                "kwok",
                f"--kubeconfig={kubeconfig}",
                "--manage-all-nodes=true",
                f"--cidr={POD_CIDR}",
                f"--node-ip={NODE_IP}",
                f"--server-address=127.0.0.1:{kwok_port}",
                "--v=WARN",  # INFO logs every status patch: the tail attached to a failure would hold nothing else
            ],
        )
        self._wait("kube-controller-manager to create the default ServiceAccount", self._default_sa, t0 + timeout_s)
        self.started_s = time.monotonic() - t0

    def _default_sa(self) -> bool:
        try:
            self.kube.get("v1", "ServiceAccount", "default", "default")
        except ApiError:
            return False
        return True

    def _wait(self, what: str, check: Callable[[], bool], deadline: float) -> None:
        while not check():
            dead = [name for name, p in self.procs.items() if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{', '.join(dead)} exited while waiting for {what} (see its log)")
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}")
            time.sleep(0.2)

    def stop(self) -> None:
        if hasattr(self, "kube"):  # set once the API server was started
            self.kube.close()
        for name in reversed(list(self.procs)):
            proc = self.procs[name]
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=5)  # state is thrown away: no need for a graceful drain
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

"""A compose file's brook services as local processes (there is no Docker engine here), for
test_compose.py (docker-compose.yml) and test_compose_secured.py (docker-compose.secured.yml).

Each brook service (built from this repository's Dockerfile, or its image) runs with its own argv
(the Dockerfile's ENTRYPOINT, or the service's `entrypoint`, then its `command`) and its own
`environment`, translated to where Docker would have put things:
  - a long-running service's name (and `hostname`) brook-N -> 127.0.S.N, S the file's own subnet
    (two compose modules run side by side under xdist); all of 127/8 is loopback on Linux, so
    every node serves the same container ports on its own address;
  - a wildcard bind (`0.0.0.0`, `::`, an empty host) -> that address: in a container it means
    the container's own interfaces;
  - a published port on the host, `localhost:H` with `ports: ["H:C"]` -> the address of the
    service publishing H and its port C, which is where Docker forwards H;
  - a volume's container path -> a directory: one per named volume, shared by every service that
    mounts it (as Docker shares it), or the directory a test gives for a bind mount (`./certs`).
A one-shot service (another service waits for it with `condition: service_completed_successfully`,
e.g. `brook format` before a node's first start) runs to completion, exit code 0, before the
long-running services start.
"""

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import yaml

from . import paths
from .broker import SECRET_KEY_PARTS, shown_argv

REPO = paths.REPO_DIR
DOCKERFILE = REPO / "Dockerfile"
ENV_PREFIX = "BROOK_"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0
ONE_SHOT_TIMEOUT_S = 60.0
COMPLETED = "service_completed_successfully"


# ---------------------------------------------------------------------------------------------
# Reading a compose file and the Dockerfile


def load_compose(path: Path) -> dict:
    return yaml.safe_load(Path(path).read_text())


def _runs_brook(svc: dict) -> bool:
    build = svc.get("build")
    context = build.get("context") if isinstance(build, dict) else build
    return (context is not None and Path(REPO, context).resolve() == REPO) or str(svc.get("image", "")).startswith("brook:")


def one_shot_service_names(compose: dict) -> List[str]:
    """Brook services another service waits for to complete (`condition: service_completed_successfully`)."""
    services = compose.get("services") or {}
    waited = set()
    for svc in services.values():
        depends = svc.get("depends_on") or {}
        if isinstance(depends, dict):
            waited |= {name for name, how in depends.items() if (how or {}).get("condition") == COMPLETED}
    return sorted(name for name in waited if name in services and _runs_brook(services[name]))


def brook_service_names(compose: dict) -> List[str]:
    """The long-running services that run Brook."""
    one_shot = set(one_shot_service_names(compose))
    return sorted(name for name, svc in (compose.get("services") or {}).items()
                  if _runs_brook(svc) and name not in one_shot)


def dockerfile_entrypoint() -> List[str]:
    """The last ENTRYPOINT of the Dockerfile (the runtime stage's), which must be exec (JSON) form."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    entrypoints = [line.split(None, 1)[1] for line in text.splitlines() if line.strip().upper().startswith("ENTRYPOINT ")]
    assert entrypoints, "the Dockerfile has no ENTRYPOINT"
    value = json.loads(entrypoints[-1])
    assert isinstance(value, list) and value, f"the Dockerfile's ENTRYPOINT must be exec form: {entrypoints[-1]}"
    return [str(v) for v in value]


def _as_argv(value) -> List[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value)
    return [str(v) for v in value]


def service_argv(svc: dict) -> List[str]:
    entrypoint = _as_argv(svc["entrypoint"]) if "entrypoint" in svc else dockerfile_entrypoint()
    return entrypoint + _as_argv(svc.get("command"))


def service_env(svc: dict) -> Dict[str, str]:
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def service_ports(svc: dict) -> List[Tuple[int, int]]:
    """(published host port, container port) pairs, short or long syntax."""
    out = []
    for entry in svc.get("ports") or []:
        if isinstance(entry, dict):
            out.append((int(entry["published"]), int(entry["target"])))
            continue
        parts = str(entry).split("/")[0].split(":")
        assert len(parts) >= 2, f"port {entry!r}: publish it on a fixed host port (HOST:CONTAINER)"
        out.append((int(parts[-2]), int(parts[-1])))
    return out


def service_volumes(svc: dict) -> List[Tuple[str, str]]:
    """(source, container path) pairs: a named volume, a `./` bind mount, or "" (anonymous)."""
    out = []
    for entry in svc.get("volumes") or []:
        if isinstance(entry, dict):
            out.append((str(entry.get("source") or ""), entry["target"]))
        else:
            parts = str(entry).split(":")
            out.append((parts[0], parts[1]) if len(parts) >= 2 else ("", parts[0]))
    return out


def service_volume_targets(svc: dict) -> List[str]:
    return [target for _source, target in service_volumes(svc)]


def settings_of(argv: List[str], env: Dict[str, str]) -> Dict[str, str]:
    """Kafka keys as the broker reads them: env (BROOK_X_Y -> x.y), then `--override`s on top
    (before a subcommand such as `format`, and after it)."""
    settings = {k[len(ENV_PREFIX):].lower().replace("_", "."): v for k, v in env.items() if k.startswith(ENV_PREFIX)}
    args = iter(argv[1:])
    for arg in args:
        assert arg != "--config" and not arg.startswith("--config="), (
            "the compose tests map only environment and --override settings, not a --config file"
        )
        if arg == "--override":
            key, _, value = next(args).partition("=")
            settings[key.strip()] = value
        elif arg.startswith("--override="):
            key, _, value = arg[len("--override="):].partition("=")
            settings[key.strip()] = value
    return settings


def split_listener(text: str) -> Tuple[str, str, int]:
    """`NAME://host:port` -> (NAME, host, port)."""
    name, _, rest = text.strip().partition("://")
    host, _, port = rest.rpartition(":")
    return name.upper(), host.strip("[]"), int(port)


def client_listener(settings: Dict[str, str], key: str) -> Tuple[str, int]:
    controllers = {n.strip().upper() for n in settings.get("controller.listener.names", "").split(",") if n.strip()}
    for item in settings[key].split(","):
        if not item.strip():
            continue
        name, host, port = split_listener(item)
        if name not in controllers:
            return host, port
    raise AssertionError(f"no client listener in {key}={settings[key]}")


def named_listener(settings: Dict[str, str], key: str, listener: str) -> Tuple[str, int]:
    """The host and port of `listener` in `key` (`listeners` or `advertised.listeners`)."""
    for item in settings[key].split(","):
        if item.strip():
            name, host, port = split_listener(item)
            if name == listener.upper():
                return host, port
    raise AssertionError(f"no {listener} listener in {key}={settings[key]}")


# ---------------------------------------------------------------------------------------------
# The services as local processes


@dataclass
class Node:
    service: str
    node_id: int
    ip: str
    argv: List[str]
    env: Dict[str, str]
    settings: Dict[str, str]
    log_path: Path
    one_shot: bool = False
    proc: Optional[subprocess.Popen] = None
    exit_code: Optional[int] = field(default=None)

    @property
    def bootstrap(self) -> str:
        host, port = client_listener(self.settings, "advertised.listeners")
        return f"{host}:{port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.settings['metrics.listener']}/metrics"

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError as e:
            return f"(no log: {e})"

    def __repr__(self) -> str:
        if self.one_shot:
            return f"Node({self.service}, one-shot)"
        return f"Node({self.service}, node.id={self.node_id}, {self.bootstrap})"


def translate(value: str, own_ip: str, host_ips: Dict[str, str], published: Dict[int, Tuple[str, int]], volumes: Dict[str, Path]) -> str:
    """One argument or environment value, from the container's point of view to this machine's."""
    # A published port on the host -> the publishing service's address and container port.
    def publish(m):
        host_port = int(m.group(2))
        if host_port not in published:
            return m.group(0)
        ip, port = published[host_port]
        return f"{ip}:{port}"

    value = re.sub(r"(?<![\w.-])(localhost|127\.0\.0\.1):(\d+)", publish, value)
    # Compose service names / hostnames -> their loopback addresses.
    for host, ip in host_ips.items():
        value = re.sub(rf"(?<![\w.-]){re.escape(host)}(?![\w.-])", ip, value)
    # Wildcard binds -> this service's own address.
    value = re.sub(r"(://|^|=)(0\.0\.0\.0|\[::\]|::)?:(\d+)", lambda m: f"{m.group(1)}{own_ip}:{m.group(3)}", value)
    # Volume mount points -> local directories.
    for target, local in volumes.items():
        value = re.sub(rf"(^|[=,]){re.escape(target)}(?=$|[/,])", lambda m: f"{m.group(1)}{local}", value)
    return value


def compose_nodes(compose: dict, tmp: Path, binds: Optional[Dict[str, Path]] = None, subnet: int = 1) -> List[Node]:
    """The brook services of `compose` as local processes (not started): the one-shot ones
    first. Service brook-N gets 127.0.`subnet`.N: each compose module passes its own, since the
    modules run side by side. `binds` maps a bind mount's source (`./certs`) to a local
    directory; named volumes get one directory under `tmp` each."""
    names = brook_service_names(compose)
    one_shot = one_shot_service_names(compose)
    services = {name: compose["services"][name] for name in names + one_shot}
    host_ips: Dict[str, str] = {}
    for i, name in enumerate(names, start=1):
        host_ips[name] = f"127.0.{subnet}.{i}"
        hostname = services[name].get("hostname")
        if hostname:
            host_ips[hostname] = host_ips[name]
    published = {host: (host_ips[name], container) for name in names for host, container in service_ports(services[name])}
    nodes = []
    for i, name in enumerate(one_shot + names, start=1):
        svc = services[name]
        ip = host_ips.get(name, f"127.0.{subnet}.{100 + i}")  # a one-shot service binds nothing
        volumes = {}
        for source, target in service_volumes(svc):
            if source.startswith("."):
                assert binds and source in binds, f"{name}: bind mount {source} needs a local directory"
                volumes[target] = binds[source]
            else:
                volumes[target] = tmp / "volumes" / (source or f"{name}-anonymous")
                volumes[target].mkdir(parents=True, exist_ok=True)
        argv = [translate(a, ip, host_ips, published, volumes) for a in service_argv(svc)]
        assert argv[0] == "brook", f"{name} runs {argv[0]!r}, expected the brook binary"
        argv[0] = str(paths.brook_bin())
        env = {k: translate(v, ip, host_ips, published, volumes) for k, v in service_env(svc).items()}
        settings = settings_of(argv, env)
        nodes.append(Node(name, int(settings.get("node.id", 0)), ip, argv, env, settings, tmp / f"{name}.log",
                          one_shot=name in one_shot))
    return nodes


def bind_addresses(node: Node) -> List[Tuple[str, int]]:
    out = [(host, port) for _name, host, port in (split_listener(l) for l in node.settings["listeners"].split(",") if l.strip())]
    host, _, port = node.settings["metrics.listener"].rpartition(":")
    return out + [(host, int(port))]


def taken_addresses(nodes: List[Node]) -> List[str]:
    """Why the long-running nodes cannot bind where they would (empty when they can)."""
    problems = []
    for node in nodes:
        if node.one_shot:
            continue
        for host, port in bind_addresses(node):
            if host != node.ip:
                problems.append(f"{node.service}: {host}:{port} is not its own address {node.ip}")
                continue
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the broker binds
                try:
                    s.bind((host, port))
                except OSError as e:
                    problems.append(f"{host}:{port} ({node.service}) is taken ({e}): is a broker running on *:{port}?")
    return problems


def wait_tcp(host: str, port: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def _launch(node: Node) -> None:
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    with open(node.log_path, "ab") as log:
        env = {k: "[hidden]" if any(p in k.lower().replace("_", ".") for p in SECRET_KEY_PARTS) else v
               for k, v in node.env.items()}
        log.write(f"==== env {json.dumps(env)}\n==== start {shlex.join(shown_argv(node.argv))}\n".encode())
        log.flush()
        node.proc = subprocess.Popen(
            node.argv,
            env={**base_env, **node.env, "RUST_BACKTRACE": "1"},
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def start(nodes: List[Node]) -> Optional[str]:
    """Runs the one-shot nodes to completion, then launches the others and waits until each
    serves its client listener; returns what went wrong, or None."""
    for node in (n for n in nodes if n.one_shot):
        _launch(node)
        try:
            node.exit_code = node.proc.wait(timeout=ONE_SHOT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return f"{node!r} still running after {ONE_SHOT_TIMEOUT_S} s\n{node.log_tail()}"
        if node.exit_code != 0:
            return f"{node!r} exited with {node.exit_code}\n{node.log_tail()}"
    running = [n for n in nodes if not n.one_shot]
    for node in running:
        _launch(node)
    deadline = time.monotonic() + START_TIMEOUT_S
    for node in running:
        host, port = node.bootstrap.rsplit(":", 1)
        if not wait_tcp(host, int(port), deadline):
            code = node.proc.poll()
            state = f"exited with {code}" if code is not None else f"not serving after {START_TIMEOUT_S} s"
            return f"{node!r} {state}\n{node.log_tail()}"
    return None


def stop(nodes: List[Node]) -> None:
    """SIGTERM to every running node, SIGKILL after STOP_TIMEOUT_S."""
    running = [n for n in nodes if n.proc is not None and n.proc.poll() is None]
    for n in running:
        try:
            os.killpg(n.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for n in running:
        try:
            n.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(n.proc.pid, signal.SIGKILL)
            n.proc.wait()
    for n in nodes:
        if n.proc is not None:
            n.exit_code = n.proc.returncode


def serve(nodes: list):
    """A module fixture's body for compose `nodes` (from `compose_nodes`): fails the module on a
    taken address or a service that does not start, yields the long-running nodes, stops them all."""
    import pytest

    problems = taken_addresses(nodes)
    if problems:
        pytest.fail("\n".join(problems))
    try:
        failed = start(nodes)
        if failed:
            pytest.fail(failed)
        yield [n for n in nodes if not n.one_shot]
    finally:
        stop(nodes)

"""Network partitions between brokers that share 127.0.0.1: cgroup-tagged nftables rules.

Why not network namespaces with veth pairs: the harness runs every node on 127.0.0.1 (its
listeners, readiness probes, advertised addresses and Metadata checks all assume it), so moving
nodes into namespaces means re-addressing the whole harness. Instead each node's process is
started inside its own cgroup v2 (`<cgroup2 mount>/brook-chaos-<pid>-n<id>`: the launch command
is prefixed with a shell that writes its pid to the cgroup and then execs the broker, so every
socket it opens, listening and accepted ones included, belongs to that cgroup). nftables'
`socket cgroupv2` match on the output hook then tells the brokers' packets apart from the
clients' on loopback. Isolating node N drops, in both directions, every packet a broker sends to
another broker's ports (client and controller listeners, and a secured cluster's CLIENT and
INTERNAL ones): N's packets to the others' ports and
the others' packets to N's ports. Connections stay open (a blackhole, not a reset); clients in
the root cgroup still reach every node, as in Jepsen's "isolated leader still talks to clients".

Needs root, `nft` (Debian: nftables), `unshare` (util-linux) and a cgroup2 mount. nft resolves a
cgroupv2 path under /sys/fs/cgroup only, so on hybrid hierarchies (cgroup2 at
/sys/fs/cgroup/unified) the rules are loaded from a private mount namespace where cgroup2 is
mounted at /sys/fs/cgroup (the match itself is by cgroup id, so it holds everywhere).
"""

import os
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Optional


def cgroup2_mount() -> Optional[Path]:
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[2] == "cgroup2":
                return Path(parts[1])
    except OSError:
        pass
    return None


class NetFaults:
    """Set up before the cluster's first start (`wrap(cluster)`), `isolate(node_id)`, `heal()`,
    `cleanup()` after the cluster stopped."""

    def __init__(self, tag: Optional[str] = None):
        self.tag = tag or f"brook-chaos-{os.getpid()}"
        self.table = self.tag.replace("-", "_")
        self.mount = cgroup2_mount()
        self.cgroups: Dict[int, Path] = {}
        self.ports: Dict[int, List[int]] = {}
        self.isolated: Optional[int] = None
        self.ready = False

    @staticmethod
    def unavailable_reason() -> Optional[str]:
        if os.geteuid() != 0:
            return "not root"
        for tool in ("nft", "unshare", "sh"):
            if shutil.which(tool) is None:
                return f"{tool} not found (Debian: apt-get install nftables util-linux)"
        if cgroup2_mount() is None:
            return "no cgroup2 mount"
        return None

    def _nft(self, script: str) -> None:
        cmd = ["unshare", "-m", "sh", "-c", "mount -t cgroup2 none /sys/fs/cgroup && exec nft -f -"]
        proc = subprocess.run(cmd, input=script, capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            raise RuntimeError(f"nft failed ({proc.returncode}): {proc.stderr.strip()}\n{script}")

    def wrap(self, cluster) -> None:
        """Give every node its cgroup and create the (empty) nftables table; raises RuntimeError
        if the kernel refuses."""
        assert self.mount is not None
        for node in cluster.nodes:
            cg = self.mount / f"{self.tag}-n{node.node_id}"
            cg.mkdir(exist_ok=True)
            self.cgroups[node.node_id] = cg
            # A secured cluster's nodes also talk on their extra listeners (harness.security's
            # INTERNAL inter-broker listener): isolation cuts those too.
            extra = getattr(node, "listener_ports", {})
            self.ports[node.node_id] = [node.port, node.controller_port, *extra.values()]
            original = node._argv

            def wrapped(original=original, cg=cg):
                return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(cg), *original()]

            node._argv = wrapped
        self._nft(f"add table inet {self.table}\n"
                  f"add chain inet {self.table} out {{ type filter hook output priority 0; policy accept; }}\n")
        # Prove the match loads (the kernel may lack socket cgroupv2 matching).
        first = next(iter(self.cgroups))
        self._nft(self._rules_for(first) + f"flush chain inet {self.table} out\n")
        self.ready = True

    def _rules_for(self, node_id: int) -> str:
        def ports(ids):
            return "{ " + ", ".join(str(p) for i in ids for p in self.ports[i]) + " }"

        others = [i for i in self.cgroups if i != node_id]
        lines = [f'add rule inet {self.table} out socket cgroupv2 level 1 "{self.cgroups[node_id].name}" '
                 f'tcp dport {ports(others)} drop']
        for m in others:
            lines.append(f'add rule inet {self.table} out socket cgroupv2 level 1 "{self.cgroups[m].name}" '
                         f'tcp dport {ports([node_id])} drop')
        return "\n".join(lines) + "\n"

    def isolate(self, node_id: int) -> None:
        self._nft(f"flush chain inet {self.table} out\n" + self._rules_for(node_id))
        self.isolated = node_id

    def heal(self) -> None:
        if self.ready and self.isolated is not None:
            self._nft(f"flush chain inet {self.table} out\n")
        self.isolated = None

    def cleanup(self) -> None:
        if self.ready:
            try:
                self._nft(f"delete table inet {self.table}\n")
            except (RuntimeError, subprocess.SubprocessError):
                pass
            self.ready = False
        for cg in self.cgroups.values():
            try:
                cg.rmdir()
            except OSError:
                pass

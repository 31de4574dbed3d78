#!/usr/bin/env bash
# Install every client and tool the system tests use, on a fresh Debian 12 machine (as root).
# Idempotent: each step checks first and skips what is already there. Fails loudly (non-zero,
# naming the missing piece) rather than letting a test skip for a missing client.
#   integration-tests/install.sh            (PYTHON=/path/to/python to choose the interpreter)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
libs=${KAFKA_LIBS:-$repo/.cache/kafka/libs}
kafka_version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/kafka-dist/pom.xml")
connect_libs=${CONNECT_LIBS:-$repo/.cache/connect/libs}
connect_version=$(sed -n 's:.*<connect.version>\(.*\)</connect.version>.*:\1:p' "$here/connect-dist/pom.xml")
python=${PYTHON:-python3}

log() { echo "install.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

apt_updated=0
apt_install() {  # apt_install PACKAGE... (apt-get update once, only when something is missing)
  if [ "$apt_updated" = 0 ]; then
    log "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    apt_updated=1
  fi
  log "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# 1. Debian packages: kcat (librdkafka 2.0.2, the "old client" in the matrix), a JDK and Maven
#    for Apache Kafka's jars, docker-compose 1.29 (test_compose.py validates docker-compose.yml
#    with `docker-compose config`, which needs no Docker engine), nftables (the chaos run's
#    network partitions), and Python with pip if the machine has none.
command -v kcat >/dev/null 2>&1 || apt_install kcat
command -v docker-compose >/dev/null 2>&1 || apt_install docker-compose
# nftables: the chaos run's network partitions (test_chaos_short.py, chaos/netfault.py).
command -v nft >/dev/null 2>&1 || apt_install nftables
# `ss` shows the broker's socket buffer sizes (test_config_and_limits.py).
command -v ss >/dev/null 2>&1 || apt_install iproute2
# openssl: scripts/certs.sh makes the CA and certificates of the TLS tests.
command -v openssl >/dev/null 2>&1 || apt_install openssl
command -v java >/dev/null 2>&1 || apt_install default-jdk-headless
command -v mvn >/dev/null 2>&1 || apt_install maven
command -v "$python" >/dev/null 2>&1 || apt_install python3
"$python" -m pip --version >/dev/null 2>&1 || apt_install python3-pip

# 2. Python packages, pinned. Debian's own python3 is "externally managed" (PEP 668); these
#    machines are disposable test hosts, so install into it anyway.
log "pip install -r requirements.txt ($("$python" --version 2>&1))"
PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
  "$python" -m pip install -q -r "$here/requirements.txt"

# 3. Apache Kafka's jars (reference broker + CLI tools + Java client) from Maven Central.
#    slf4j-api must be 2.x (the pom pins it): with 1.7.x beside the slf4j 2 binding, Kafka logs nothing.
if [ -f "$libs/kafka_2.13-$kafka_version.jar" ] && [ -f "$libs/kafka-tools-$kafka_version.jar" ] \
   && ls "$libs"/slf4j-api-2.*.jar >/dev/null 2>&1; then
  log "Kafka $kafka_version jars already in $libs"
else
  log "fetching Kafka $kafka_version jars into $libs"
  mkdir -p "$libs"
  rm -f "$libs"/slf4j-api-1.*.jar
  mvn -q -B -f "$here/kafka-dist/pom.xml" dependency:copy-dependencies -DoutputDirectory="$libs"
fi

# 3b. Kafka Connect + MirrorMaker 2 (test_connect.py, test_mirror_maker.py): Connect's runtime, the
#     file and mirror plugins and their kafka-clients, all one release, on a classpath of their own
#     (connect-dist/pom.xml says why it is not the broker's 4.4 jars).
connect_jars() { for a in connect-runtime connect-file connect-mirror connect-mirror-client kafka-clients; do
  [ -f "$connect_libs/$a-$connect_version.jar" ] || return 1; done; }
if connect_jars; then
  log "Kafka Connect $connect_version jars already in $connect_libs"
else
  log "fetching Kafka Connect $connect_version jars into $connect_libs"
  mkdir -p "$connect_libs"
  mvn -q -B -f "$here/connect-dist/pom.xml" dependency:copy-dependencies -DoutputDirectory="$connect_libs"
fi

# 4. Each other client's own installer (java, franz, kafkajs, ...). BROOK_INSTALL_ONLY_PYTHON=1
#    skips them (for working on the Python side while others build their drivers).
for script in "$here"/drivers/*/install.sh; do
  [ "${BROOK_INSTALL_ONLY_PYTHON:-0}" = 1 ] && { log "skipping $script"; continue; }
  [ -f "$script" ] || continue
  log "running $script"
  bash "$script"
done

# 4b. The third-party clients' own test suites run against the broker (franz-go's pkg/kgo tests,
#     librdkafka's test-runner), fetched and built once under .cache. A C/C++ toolchain builds
#     librdkafka.
if [ "${BROOK_INSTALL_ONLY_PYTHON:-0}" != 1 ]; then
  command -v g++ >/dev/null 2>&1 && command -v make >/dev/null 2>&1 || apt_install build-essential
  log "running $here/third-party/install.sh"
  PYTHON="$python" bash "$here/third-party/install.sh"
  # Rust nightly and cargo-fuzz (pinned) for the fuzz targets' short run (`make fuzz`).
  log "running $repo/fuzz/install.sh"
  bash "$repo/fuzz/install.sh"
fi

# 5. Verify: everything the Python-side drivers need is really there.
kcat -V >/dev/null 2>&1 || die "kcat does not run"
java -version >/dev/null 2>&1 || die "java does not run"
docker-compose version >/dev/null 2>&1 || die "docker-compose does not run"
[ -f "$libs/kafka_2.13-$kafka_version.jar" ] || die "Kafka jars missing in $libs"
connect_jars || die "Kafka Connect jars missing in $connect_libs"
"$python" - <<'PY' || die "a Python client or codec is missing"
import confluent_kafka, kafka, lz4.frame, pytest, pytest_timeout, snappy, yaml, zstandard  # noqa: F401
from kafka.codec import has_gzip, has_lz4, has_snappy, has_zstd
missing = [n for n, ok in [("gzip", has_gzip()), ("snappy", has_snappy()), ("lz4", has_lz4()), ("zstd", has_zstd())] if not ok]
if missing:
    raise SystemExit(f"kafka-python lacks codecs: {missing}")
PY
log "ok: kcat $(kcat -V 2>&1 | sed -n 's/^Version \([^ ]*\).*/\1/p'), confluent-kafka $("$python" -c 'import confluent_kafka as c; print(c.version())'), kafka-python $("$python" -c 'import kafka; print(kafka.__version__)'), Kafka $kafka_version, Connect $connect_version"

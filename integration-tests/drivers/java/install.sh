#!/usr/bin/env bash
# Build the Java-client driver: target/brook-driver.jar, a shaded jar runnable with only a JDK
# (java -jar target/brook-driver.jar <command> --bootstrap HOST:PORT ...). Needs Maven and JDK 17+;
# dependencies come from Maven Central. Idempotent: re-running rebuilds the jar.
set -euo pipefail
cd "$(dirname "$0")"
mvn -q -B -Dstyle.color=never package -DskipTests
test -f target/brook-driver.jar

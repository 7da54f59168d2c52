#!/usr/bin/env bash
# Installs the system prerequisites of the local cluster (Java 17+ and Maven) when
# they are missing and we may install packages; otherwise says what to install.
# A JDK, not only a JRE: `make bench` compiles the JVM peers (benchmarks/jvm).
set -euo pipefail

need=()
if ! command -v javac >/dev/null 2>&1; then need+=(openjdk-17-jdk-headless); fi
if ! command -v mvn >/dev/null 2>&1; then need+=(maven); fi
if [ ${#need[@]} -eq 0 ]; then exit 0; fi

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${need[*]} with apt-get..." >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
else
  echo "missing: ${need[*]}; install a Java 17+ JDK and Maven, then run again" >&2
  exit 1
fi

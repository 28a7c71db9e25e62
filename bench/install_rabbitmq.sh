#!/usr/bin/env bash
# Install Debian's rabbitmq-server (the RabbitMQ baseline of the benchmarks) when it is missing.
# Needs root and apt-get; exits 1 with a message otherwise (callers decide whether that is fatal).
set -euo pipefail
if command -v rabbitmq-server >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "[bench] rabbitmq-server is missing and cannot be installed here (needs root and" \
       "apt-get); the RabbitMQ baseline will be reported as not available" >&2
  exit 1
fi
echo "[bench] installing rabbitmq-server (Debian package) for the RabbitMQ baseline" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server >/dev/null
# Debian starts the service on install; the harness runs its own node, so stop this one.
if command -v systemctl >/dev/null 2>&1; then systemctl stop rabbitmq-server 2>/dev/null || true; fi
service rabbitmq-server stop >/dev/null 2>&1 || true

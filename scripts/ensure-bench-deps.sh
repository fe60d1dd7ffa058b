#!/usr/bin/env bash
# Install the peer servers the benchmark harness runs against, only when they are missing:
#   - nats-server (Debian's nats-server; JetStream is built in) when `nats-server` is not on PATH;
#   - rabbitmq-server (Debian's rabbitmq-server, which ships the rabbitmq_stream plugin) when its
#     launcher /usr/lib/rabbitmq/bin/rabbitmq-server is missing.
# Debian starts both as system services on install; the harness runs its own throw-away servers on
# free loopback ports, so the services are stopped again. Runs apt-get as root (or through sudo).
set -euo pipefail
RABBITMQ_SERVER=/usr/lib/rabbitmq/bin/rabbitmq-server
missing=()
command -v nats-server >/dev/null 2>&1 || missing+=(nats-server)
[ -x "$RABBITMQ_SERVER" ] || missing+=(rabbitmq-server)
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    SUDO="sudo"
fi
echo "installing peer servers for the benchmarks: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
for service in nats-server rabbitmq-server epmd; do
    $SUDO systemctl stop "$service" >/dev/null 2>&1 || $SUDO service "$service" stop >/dev/null 2>&1 || true
done
command -v nats-server >/dev/null 2>&1 || { echo "nats-server is still not on PATH" >&2; exit 1; }
[ -x "$RABBITMQ_SERVER" ] || { echo "$RABBITMQ_SERVER is still missing after installing rabbitmq-server" >&2; exit 1; }

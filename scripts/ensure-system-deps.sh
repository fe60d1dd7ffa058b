#!/usr/bin/env bash
# Install the system packages the test suite needs, only when they are missing:
#   - an etcd server (Debian's etcd-server) when `etcd` is not on PATH;
#   - a Java development kit (for Spark, and javac for the JVM segment reader) when `java` or
#     `javac` is not on PATH;
#   - Chromium (the console's browser tests drive it headless) when `chromium` is not on PATH;
#   - nftables (the fault tests reject a peer's traffic inside a network namespace) when `nft` is not;
#   - promtool (the alert rules' checks and unit tests), from Debian's prometheus package, when it is not;
#   - kcat (the Kafka listener's tests run it as a user would) when it is not on PATH.
# Runs apt-get as root (or through sudo). Quick when nothing is missing.
set -euo pipefail
missing=()
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ] || missing+=(nftables)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
if ! command -v java >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
    missing+=(openjdk-17-jdk-headless)
fi
check_java() {
    # Spark (the connector's tests, benchmark and example) runs on the JVM: say plainly what is missing.
    if ! java -version >/dev/null 2>&1; then
        echo "Spark needs a Java runtime (17 or later), and \`java -version\` does not run:" >&2
        java -version 2>&1 | sed 's/^/    /' >&2 || true
        echo "install one, e.g. \`apt-get install openjdk-17-jre-headless\`" >&2
        exit 1
    fi
}
if [ ${#missing[@]} -eq 0 ]; then
    check_java
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    SUDO="sudo"
fi
echo "installing system packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Debian releases without JDK 17 packages have a newer one as default-jdk-headless (Spark runs on 17+).
if [[ " ${missing[*]} " == *" openjdk-17-jdk-headless "* ]] && ! apt-cache show openjdk-17-jdk-headless >/dev/null 2>&1; then
    missing=("${missing[@]/openjdk-17-jdk-headless/default-jdk-headless}")
fi
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian's etcd-server starts a system service on install; the tests start their own servers.
if [[ " ${missing[*]} " == *" etcd-server "* ]]; then
    $SUDO systemctl stop etcd >/dev/null 2>&1 || $SUDO service etcd stop >/dev/null 2>&1 || true
fi
# So does Debian's prometheus (the tests need only its promtool).
if [[ " ${missing[*]} " == *" prometheus "* ]]; then
    $SUDO systemctl stop prometheus >/dev/null 2>&1 || $SUDO service prometheus stop >/dev/null 2>&1 || true
fi
command -v etcd >/dev/null 2>&1 || { echo "etcd is still not on PATH after installing etcd-server" >&2; exit 1; }
command -v chromium >/dev/null 2>&1 || { echo "chromium is still not on PATH after installing ${missing[*]}" >&2; exit 1; }
command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ] || { echo "nft is still missing after installing ${missing[*]}" >&2; exit 1; }
command -v promtool >/dev/null 2>&1 || { echo "promtool is still not on PATH after installing ${missing[*]}" >&2; exit 1; }
command -v kcat >/dev/null 2>&1 || { echo "kcat is still not on PATH after installing ${missing[*]}" >&2; exit 1; }
command -v javac >/dev/null 2>&1 || { echo "javac is still not on PATH after installing ${missing[*]}" >&2; exit 1; }
check_java

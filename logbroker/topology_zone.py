"""A Kubernetes node's topology zone as the LogBroker node's rack (``python -m logbroker.topology_zone``).

A pod cannot read its Kubernetes node's labels through the downward API, so an init container
runs this once before the node starts (decision 0291): it asks the API server for its own
Kubernetes node (``GET /api/v1/nodes/<name>``, with the pod's service-account token and CA) and
writes ``rack = "<zone>"`` to a TOML file that ``logbroker serve --config`` reads. The zone is the
well-known label ``topology.kubernetes.io/zone``. A Kubernetes node without it (a one-zone test
cluster) gives an empty rack, said on stderr; a refused or unreachable API server is an error
(exit 1), never a silent empty rack, since placement would then ignore the zones. The request is
bounded by a timeout and a fixed number of attempts.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any, Final

ZONE_LABEL: Final = "topology.kubernetes.io/zone"
SERVICE_ACCOUNT_DIR: Final = "/var/run/secrets/kubernetes.io/serviceaccount"
# A label value: at most 63 characters of [A-Za-z0-9._-], starting and ending alphanumeric.
LABEL_VALUE: Final = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?")
# A node name is a DNS subdomain.
NODE_NAME: Final = re.compile(r"[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?")
RESPONSE_BYTES_MAX: Final = 4 * 1024 * 1024
TIMEOUT_S: Final = 5.0
ATTEMPTS: Final = 5
RETRY_DELAY_S: Final = 1.0


class ZoneError(Exception):
    """The zone could not be learnt (refused, unreachable, or not a node object)."""


def zone_of(node: Mapping[str, Any]) -> str:
    """The zone label of a Kubernetes node object ('' when it has none)."""
    metadata = node.get("metadata")
    if not isinstance(metadata, Mapping):
        raise ZoneError("the API server's answer is not a node object (no metadata)")
    labels = metadata.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise ZoneError("the node's labels are not an object")
    zone = labels.get(ZONE_LABEL, "")
    if not isinstance(zone, str) or LABEL_VALUE.fullmatch(zone) is None:
        raise ZoneError(f"the node's {ZONE_LABEL} label is not a label value: {zone!r}")
    return zone


def rack_toml(zone: str) -> str:
    """The ``--config`` file that sets the rack (a label value needs no TOML escaping)."""
    if LABEL_VALUE.fullmatch(zone) is None:
        raise ZoneError(f"not a label value: {zone!r}")
    return f'rack = "{zone}"\n'


def node_url(env: Mapping[str, str], node_name: str) -> str:
    """The API server's URL for ``node_name`` from the in-cluster variables every pod gets."""
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port.isdigit():
        raise ZoneError("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: not inside a pod?")
    if NODE_NAME.fullmatch(node_name) is None:
        raise ZoneError(f"not a node name: {node_name!r}")
    host = f"[{host}]" if ":" in host else host
    return f"https://{host}:{port}/api/v1/nodes/{urllib.parse.quote(node_name)}"


def fetch_node(url: str, service_account_dir: str) -> dict[str, Any]:
    """The node object, with the pod's token, verified against the cluster's CA; bounded retries."""
    try:
        with open(os.path.join(service_account_dir, "token"), encoding="ascii") as f:
            token = f.read().strip()
        context = ssl.create_default_context(cafile=os.path.join(service_account_dir, "ca.crt"))
    except (OSError, ssl.SSLError, UnicodeDecodeError) as exc:
        raise ZoneError(f"cannot read the service account's token or CA in {service_account_dir}: {exc}") from exc
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})
    last = ""
    for attempt in range(ATTEMPTS):
        if attempt:
            time.sleep(RETRY_DELAY_S)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=context) as response:
                body = response.read(RESPONSE_BYTES_MAX + 1)
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403, 404):  # no retry mends missing RBAC or a wrong name
                raise ZoneError(f"the API server refused GET {url}: {exc.code} {exc.reason} (the pod's service "
                                "account needs get on nodes: deploy/kubernetes/base/rbac.yaml)") from exc
            last = f"{exc.code} {exc.reason}"
            continue
        except (urllib.error.URLError, OSError) as exc:
            if isinstance(getattr(exc, "reason", exc), ssl.SSLCertVerificationError):
                raise ZoneError(f"GET {url}: the API server's certificate is not signed by the cluster's CA: "
                                f"{exc}") from exc
            last = str(exc)
            continue
        if len(body) > RESPONSE_BYTES_MAX:
            raise ZoneError(f"the node object is larger than {RESPONSE_BYTES_MAX} bytes")
        try:
            node = json.loads(body)
        except ValueError as exc:
            raise ZoneError(f"the API server's answer is not JSON: {exc}") from exc
        if not isinstance(node, dict):
            raise ZoneError("the API server's answer is not a node object")
        return node
    raise ZoneError(f"GET {url} failed {ATTEMPTS} times; last: {last}")


def write_atomically(path: str, text: str) -> None:
    temp = f"{path}.tmp"
    with open(temp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(temp, path)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m logbroker.topology_zone",
                                     description="Write the Kubernetes node's zone as a rack TOML file for "
                                                 "logbroker serve --config.")
    parser.add_argument("--node-name", required=True, help="the Kubernetes node (the downward API's spec.nodeName)")
    parser.add_argument("--out", required=True, help="the TOML file to write")
    parser.add_argument("--service-account-dir", default=SERVICE_ACCOUNT_DIR,
                        help=f"token and ca.crt (default {SERVICE_ACCOUNT_DIR})")
    return parser


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        zone = zone_of(fetch_node(node_url(os.environ if env is None else env, args.node_name),
                                  args.service_account_dir))
        write_atomically(args.out, rack_toml(zone))
    except (ZoneError, OSError) as exc:
        print(f"topology_zone: {exc}", file=sys.stderr)
        return 1
    print(f"topology_zone: node {args.node_name}: rack {zone!r}" + ("" if zone else f" (no {ZONE_LABEL} label)"),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

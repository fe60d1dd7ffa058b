"""``logbroker certs``: a development certificate authority and node certificates.

Writes ``ca.pem``/``ca.key`` (a self-signed CA) and, per node, ``node-<id>.pem``/``node-<id>.key``
signed by it, valid for both server and client authentication (nodes are each other's RPC
clients), with ``localhost``, ``127.0.0.1`` and any ``--host`` names as subject alternative names.
The HTTPS listener and the internal RPC's mutual TLS both use them. An existing CA in the output
directory is reused, so more nodes can be added later. Keys are ECDSA P-256, files mode 0600.

etcd gets a CA of its own (``etcd-ca.pem``/``etcd-ca.key``, decision 0226): ``etcd-server.pem``
(server auth only, for etcd's ``--cert-file``, with the etcd host names) and ``etcd-client.pem``
(client auth only, what nodes present to etcd's ``--client-cert-auth``). A separate CA keeps the
two trust domains apart: an etcd client certificate is no node certificate on the internal RPC,
and a node certificate opens no etcd.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CERT: Final = "ca.pem"
CA_KEY: Final = "ca.key"
ETCD_CA: Final = "etcd-ca"
ETCD_SERVER: Final = "etcd-server"
ETCD_CLIENT: Final = "etcd-client"
VALID_DAYS: Final = 365
DEFAULT_HOSTS: Final = ("localhost", "127.0.0.1")


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "LogBroker development"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def load_or_create_ca(out_dir: str, name: str = "ca", common_name: str = "LogBroker development CA"
                      ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert_path, key_path = os.path.join(out_dir, f"{name}.pem"), os.path.join(out_dir, f"{name}.key")
    if os.path.exists(cert_path) and os.path.exists(key_path):
        with open(cert_path, "rb") as f:
            cert = x509.load_pem_x509_certificate(f.read())
        with open(key_path, "rb") as f:
            key = serialization.load_pem_private_key(f.read(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey), f"{key_path} is not an EC key"
        return cert, key
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(_name(common_name))
            .issuer_name(_name(common_name)).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    os.makedirs(out_dir, exist_ok=True)
    _write(key_path, _key_pem(key))
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    return cert, key


def issue(out_dir: str, name: str, hosts: Sequence[str], ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
          usages: Sequence[x509.ObjectIdentifier] = (ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH)
          ) -> tuple[str, str]:
    """Write ``<name>.pem`` and ``<name>.key`` signed by ``ca`` for ``usages``; returns their paths."""
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    alt_names: list[x509.GeneralName] = []
    for host in dict.fromkeys((*DEFAULT_HOSTS, *hosts)):
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt_names.append(x509.DNSName(host))
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
            .add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
            .sign(ca_key, hashes.SHA256()))
    cert_path, key_path = os.path.join(out_dir, f"{name}.pem"), os.path.join(out_dir, f"{name}.key")
    _write(key_path, _key_pem(key))
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def generate(out_dir: str, node_ids: Sequence[int], hosts: Sequence[str] = ()) -> list[str]:
    """The CA (made once) and a certificate per node id; returns the files written or reused."""
    ca = load_or_create_ca(out_dir)
    files = [os.path.join(out_dir, CA_CERT), os.path.join(out_dir, CA_KEY)]
    for node_id in node_ids:
        files.extend(issue(out_dir, f"node-{node_id}", hosts, ca))
    return files


def generate_etcd(out_dir: str, hosts: Sequence[str] = ()) -> list[str]:
    """The etcd CA (made once), etcd's server certificate (``hosts`` besides localhost and
    127.0.0.1) and the nodes' etcd client certificate; returns the files written or reused."""
    ca = load_or_create_ca(out_dir, ETCD_CA, "LogBroker development etcd CA")
    files = [os.path.join(out_dir, f"{ETCD_CA}.pem"), os.path.join(out_dir, f"{ETCD_CA}.key")]
    files.extend(issue(out_dir, ETCD_SERVER, hosts, ca, (ExtendedKeyUsageOID.SERVER_AUTH,)))
    files.extend(issue(out_dir, ETCD_CLIENT, (), ca, (ExtendedKeyUsageOID.CLIENT_AUTH,)))
    return files


def etcd_files(certs_dir: str) -> dict[str, str]:
    """The etcd files of ``generate_etcd`` by role: ``ca``, ``server_cert``, ``server_key``,
    ``client_cert`` and ``client_key``."""
    def path(name: str) -> str:
        return os.path.join(certs_dir, name)
    return {"ca": path(f"{ETCD_CA}.pem"), "server_cert": path(f"{ETCD_SERVER}.pem"),
            "server_key": path(f"{ETCD_SERVER}.key"), "client_cert": path(f"{ETCD_CLIENT}.pem"),
            "client_key": path(f"{ETCD_CLIENT}.key")}

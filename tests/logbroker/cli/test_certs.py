"""``logbroker certs``: the node CA and node certificates, and etcd's own CA with a server
certificate (server auth, the ``--etcd-host`` names) and the nodes' client certificate (client
auth only); the two CAs are distinct, so neither side's certificate opens the other."""

from __future__ import annotations

import os
import stat

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from logbroker.cli.command import main


def load(path: str) -> x509.Certificate:
    with open(path, "rb") as f:
        return x509.load_pem_x509_certificate(f.read())


def test_certs_writes_node_and_etcd_certificates(tmp_path, capsys):
    out = str(tmp_path / "certs")
    assert main(["certs", "--out", out, "--nodes", "1,2", "--etcd-host", "etcd"]) == 0
    written = set(capsys.readouterr().out.split())
    names = {"ca", "node-1", "node-2", "etcd-ca", "etcd-server", "etcd-client"}
    assert written == {os.path.join(out, f"{n}.{e}") for n in names for e in ("pem", "key")}
    for name in names:
        assert stat.S_IMODE(os.stat(os.path.join(out, f"{name}.key")).st_mode) == 0o600
    node_ca, etcd_ca = load(os.path.join(out, "ca.pem")), load(os.path.join(out, "etcd-ca.pem"))
    assert node_ca.subject != etcd_ca.subject
    server, client = load(os.path.join(out, "etcd-server.pem")), load(os.path.join(out, "etcd-client.pem"))
    for cert in (server, client):
        assert cert.issuer == etcd_ca.subject
        key = etcd_ca.public_key()
        assert isinstance(key, ec.EllipticCurvePublicKey) and cert.signature_hash_algorithm is not None
        key.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
    usages = {c: list(c.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) for c in (server, client)}
    assert usages == {server: [ExtendedKeyUsageOID.SERVER_AUTH], client: [ExtendedKeyUsageOID.CLIENT_AUTH]}
    names_of_server = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "etcd" in names_of_server.get_values_for_type(x509.DNSName)
    assert load(os.path.join(out, "node-1.pem")).issuer == node_ca.subject

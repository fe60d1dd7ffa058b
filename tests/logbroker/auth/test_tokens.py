"""Token issue/verify with an injected clock: expiry, the verified-token cache and its bound,
key rotation, and algorithm pinning per key."""

from __future__ import annotations

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from logbroker.auth.keys import JwtKey, KeyRing
from logbroker.auth.tokens import LEEWAY_S, Tokens
from logbroker.errors import AuthenticationError, InvalidRequestError

SECRET = "s" * 40


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_issue_then_verify_until_it_expires():
    clock = Clock(1_900_000_000.0)
    tokens = Tokens(KeyRing.from_secret(SECRET, "k1"), ttl_s=60, clock=clock)
    token, ttl = tokens.issue("alice", ("user",))
    assert ttl == 60 and jwt.get_unverified_header(token)["kid"] == "k1"
    claims = tokens.verify(token)
    assert (claims.subject, claims.roles, claims.kid) == ("alice", ("user",), "k1")
    assert claims.expires_at - claims.issued_at == 60
    clock.now += 60 + LEEWAY_S
    with pytest.raises(AuthenticationError, match="expired"):
        tokens.verify(token)
    with pytest.raises(AuthenticationError, match="expired"):
        tokens.verify(token)


def test_cache_is_bounded_and_holds_verified_tokens_only(monkeypatch):
    clock = Clock(1_900_000_000.0)
    tokens = Tokens(KeyRing.from_secret(SECRET, "k1"), ttl_s=600, clock=clock, cache_entries_max=3)
    issued = []
    for n in range(5):
        clock.now += 1
        issued.append(tokens.issue(f"u{n}", ("user",))[0])
    for token in issued:
        tokens.verify(token)
    assert len(tokens._cache) == 3 and set(tokens._cache) == set(issued[2:])
    calls = []
    monkeypatch.setattr(jwt, "decode", lambda *a, **k: calls.append(1))
    tokens.verify(issued[-1])
    assert calls == [], "a cached token is not verified again"
    with pytest.raises(AuthenticationError):
        Tokens(KeyRing.from_secret(SECRET, "k1"), ttl_s=600, clock=clock).verify(issued[0][:-2] + "xx")


def _ring_with(kid: str, alg: str) -> tuple[KeyRing, bytes]:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048) if alg == "RS256" \
        else ec.generate_private_key(ec.SECP256R1())
    public_pem = private.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo)
    return KeyRing(kid, {kid: JwtKey(kid, alg, private.public_key(), private)}), public_pem


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_asymmetric_keys_and_hmac_confusion(alg):
    ring, public_pem = _ring_with("asym", alg)
    tokens = Tokens(ring, ttl_s=60)
    token, _ = tokens.issue("bob", ("user",))
    assert tokens.verify(token).subject == "bob"
    import hashlib
    import hmac
    import json
    from base64 import urlsafe_b64encode

    def b64(data: bytes) -> str:
        return urlsafe_b64encode(data).rstrip(b"=").decode()

    claims = jwt.decode(token, options={"verify_signature": False})
    signing_input = b64(json.dumps({"alg": "HS256", "kid": "asym"}).encode()) + "." + \
        b64(json.dumps({**claims, "sub": "admin"}).encode())
    signature = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
    with pytest.raises(AuthenticationError, match="only verifies"):
        tokens.verify(signing_input + "." + b64(signature))


def test_rotation_old_kid_accepted_until_removed():
    old, new = KeyRing.from_secret(SECRET, "old"), KeyRing.from_secret("n" * 40, "new")
    before = Tokens(old, ttl_s=600)
    old_token, _ = before.issue("carol", ("user",))
    both = Tokens(KeyRing("new", {**old.keys, **new.keys}), ttl_s=600)
    assert both.verify(old_token).kid == "old"
    new_token, _ = both.issue("carol", ("user",))
    assert jwt.get_unverified_header(new_token)["kid"] == "new"
    after = Tokens(new, ttl_s=600)
    assert after.verify(new_token).subject == "carol"
    with pytest.raises(AuthenticationError, match="unknown key id"):
        after.verify(old_token)


def test_key_ring_refuses_weak_or_missing_keys(tmp_path):
    with pytest.raises(InvalidRequestError, match="at least 32 bytes"):
        KeyRing.from_secret("short", "k")
    with pytest.raises(InvalidRequestError, match="signing key"):
        KeyRing("missing", KeyRing.from_secret(SECRET, "k").keys)
    ring, public_pem = _ring_with("v", "ES256")
    with pytest.raises(InvalidRequestError, match="no private part"):
        KeyRing("v", {"v": JwtKey("v", "ES256", ring.keys["v"].verify_key, None)})
    bad = tmp_path / "keys.toml"
    for text, message in (("signing_kid = 'a'", "at least one"),
                          ("signing_kid = 'a'\n[[keys]]\nkid = 'a'\nalg = 'none'\nsecret = '" + SECRET + "'", "alg"),
                          ("signing_kid = 'a'\n[[keys]]\nkid = 'a'\nalg = 'HS256'", "needs secret"),
                          ("[[keys]]\nkid = 'a'\nalg = 'HS256'\nsecret = '" + SECRET + "'\n[[keys]]\nkid = 'a'\n"
                           "alg = 'HS256'\nsecret = '" + SECRET + "'", "twice"),
                          ("not toml [", "keys file")):
        bad.write_text(text)
        with pytest.raises(InvalidRequestError, match=message):
            KeyRing.load(str(bad))
    (tmp_path / "es.pub.pem").write_bytes(public_pem)
    bad.write_text("signing_kid = 'h'\n[[keys]]\nkid = 'h'\nalg = 'HS256'\nsecret = '" + SECRET + "'\n"
                   "[[keys]]\nkid = 'e'\nalg = 'RS256'\npublic_key_file = 'es.pub.pem'\n")
    with pytest.raises(InvalidRequestError, match="not a key for RS256"):
        KeyRing.load(str(bad))


def test_tokens_carry_the_users_id_and_credential_version():
    tokens = Tokens(KeyRing.from_secret(SECRET, "k1"), ttl_s=60)
    token, _ = tokens.issue("dave", ("user",), user_id="id-1", credential_version=3)
    claims = tokens.verify(token)
    assert (claims.user_id, claims.credential_version) == ("id-1", 3)
    bare = tokens.verify(tokens.issue("erin", ("user",))[0])
    assert (bare.user_id, bare.credential_version) == (None, None)
    for bad in ({"uid": 7}, {"ver": "3"}, {"ver": True}):
        raw = {**jwt.decode(token, options={"verify_signature": False}), **bad}
        forged = jwt.encode(raw, SECRET, algorithm="HS256", headers={"kid": "k1"})
        with pytest.raises(AuthenticationError, match="invalid token claims"):
            tokens.verify(forged)

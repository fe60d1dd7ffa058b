"""The two SASL mechanisms the Kafka listener takes (pure): PLAIN (RFC 4616: a LogBroker username
and password) and OAUTHBEARER (RFC 7628: a LogBroker access token as the bearer token).

Either message is parsed from the bytes present only, bounded, and refused with ``SaslError``
(the connection is then answered SASL_AUTHENTICATION_FAILED and closed)."""

from __future__ import annotations

import dataclasses
from typing import Final

MECHANISMS: Final = ("PLAIN", "OAUTHBEARER")
MESSAGE_BYTES_MAX: Final = 16 * 1024


class SaslError(ValueError):
    """An authentication message that is not one of the mechanism's."""


@dataclasses.dataclass(frozen=True, slots=True)
class Password:
    username: str
    password: str


@dataclasses.dataclass(frozen=True, slots=True)
class Bearer:
    token: str


def parse(mechanism: str, message: bytes) -> Password | Bearer:
    if len(message) > MESSAGE_BYTES_MAX:
        raise SaslError("the authentication message is too long")
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError("the authentication message is not UTF-8") from None
    if mechanism == "PLAIN":
        return _plain(text)
    if mechanism == "OAUTHBEARER":
        return _bearer(text)
    raise SaslError(f"mechanism {mechanism[:40]!r} is not one of {', '.join(MECHANISMS)}")


def _plain(text: str) -> Password:
    """``[authzid] NUL authcid NUL passwd``; an authorization identity, when given, must be the
    authentication identity (no acting as another user)."""
    parts = text.split("\x00")
    if len(parts) != 3:
        raise SaslError("a PLAIN message is [authzid] NUL username NUL password")
    authzid, username, password = parts
    if not username or not password:
        raise SaslError("a PLAIN message needs a username and a password")
    if authzid and authzid != username:
        raise SaslError("PLAIN: the authorization identity must be the username")
    return Password(username, password)


def _bearer(text: str) -> Bearer:
    """``gs2-header \\x01 auth=Bearer <token> \\x01 [key=value \\x01]* \\x01`` (RFC 7628 §3.1)."""
    header, sep, rest = text.partition("\x01")
    if not sep or not header.startswith(("n,", "y,")):
        raise SaslError("an OAUTHBEARER message starts with a GS2 header")
    if not rest.endswith("\x01\x01"):
        raise SaslError("an OAUTHBEARER message ends with two ^A")
    for pair in rest[:-2].split("\x01"):
        key, eq, value = pair.partition("=")
        if eq and key == "auth":
            scheme, _, token = value.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise SaslError("OAUTHBEARER: auth must be 'Bearer <token>'")
            return Bearer(token.strip())
    raise SaslError("an OAUTHBEARER message without auth=Bearer <token>")

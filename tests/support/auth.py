"""Auth settings shared by the tests that run nodes with authentication on."""

from __future__ import annotations

from typing import Any

ADMIN = "admin"
ADMIN_PASSWORD = "admin-password-for-tests"
JWT_SECRET = "a-test-signing-secret-of-at-least-32-bytes"
JWT_KID = "test-key"
METRICS_TOKEN = "a-test-scrape-credential"
AUTH_ARGS = ("--auth", "on", "--admin-user", ADMIN, "--admin-password", ADMIN_PASSWORD,
             "--jwt-secret", JWT_SECRET, "--jwt-key-id", JWT_KID, "--metrics-token", METRICS_TOKEN)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def login(http: Any, username: str, password: str) -> str:
    """A token for ``username`` through ``POST /v1/auth/token`` (``http`` is the tests' Http)."""
    answer = http.json("POST", "/v1/auth/token", body={"username": username, "password": password})
    assert answer["token_type"] == "bearer" and answer["expires_in"] > 0
    return str(answer["access_token"])

"""One user at the default storage quota cannot fill the disk: a node with auth on, on a small
filesystem of the test's own (a 40 MB tmpfs, ``small_disk``), whose default ``storage_bytes_max``
is a quarter of it. The user's writes are refused 403 ``storage_quota_exceeded`` at about 10 MB,
long before the disk is full (507 on the old rules), and another user and the admin keep writing.
"""

from __future__ import annotations

import os

from tests.http_api.conftest import Http
from tests.logbroker.test_full_disk import DISK_MB, PRODUCES_MAX, batch, small_disk  # noqa: F401  (the fixture)
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, bearer, login
from tests.support.nodes import NodeProcess

SHARE_BYTES = DISK_MB * 1024 * 1024 // 4


def user(http: Http, admin: dict[str, str], name: str) -> dict[str, str]:
    http.json("POST", "/v1/users", 201, body={"username": name, "password": f"{name}-password"}, headers=admin)
    return bearer(login(http, name, f"{name}-password"))


def test_a_user_at_the_default_storage_quota_leaves_the_disk_to_the_others(small_disk):  # noqa: F811
    with NodeProcess(os.path.join(small_disk, "node"), *AUTH_ARGS) as node:
        http = Http(node.url)
        admin = bearer(login(http, ADMIN, ADMIN_PASSWORD))
        mallory, trent = user(http, admin, "mallory"), user(http, admin, "trent")
        http.json("POST", "/v1/topics", 201, body={"name": "mallory.t"}, headers=mallory)
        refused = None
        for i in range(PRODUCES_MAX):
            reply = http.call("POST", "/v1/topics/mallory.t/records", body=batch(f"m{i}"), headers=mallory)
            if reply.status != 200:
                refused = reply
                break
        assert refused is not None and refused.status == 403, (refused and refused.status, refused and refused.data)
        assert refused.json()["code"] == "storage_quota_exceeded"
        storage = http.json("GET", "/v1/users/mallory", headers=mallory)["storage"]
        assert storage["limit_bytes"] == SHARE_BYTES and SHARE_BYTES * 0.9 < storage["used_bytes"] <= SHARE_BYTES
        http.json("POST", "/v1/topics", 201, body={"name": "trent.t"}, headers=trent)
        for i in range(20):  # about 2 MB in all
            http.json("POST", "/v1/topics/trent.t/records", body=batch(f"t{i}"), headers=trent)
        http.json("POST", "/v1/topics", 201, body={"name": "admin.t"}, headers=admin)
        http.json("POST", "/v1/topics/admin.t/records", body=batch("a"), headers=admin)
        assert http.call("GET", "/readyz").status == 200

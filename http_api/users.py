"""Tokens, users, ownership and ACLs: ``/v1/auth/token``, ``/v1/users...``, ``/v1/topics/{name}/acl``
and ``/v1/topics/{name}/owner``. Who may call each is declared in its route (``access``)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from http_api.auth import principal_of
from http_api.identity import client_address
from http_api.json_codec import json_response
from http_api.keys import NODE
from http_api.params import path_topic, read_json
from http_api.routing import route
from logbroker.errors import InvalidRequestError

QUOTAS_BODY: dict[str, Any] = {"type": "object", "description": "produce_bytes_per_s, fetch_bytes_per_s, "
                               "connections_max, topics_max, partitions_max, streams_max, long_polls_max, "
                               "groups_max, group_members_max, storage_bytes_max (0: unlimited); override the "
                               "node's defaults"}
USER_BODY = {"type": "object", "required": ["username", "password"], "properties": {
    "username": {"type": "string", "pattern": "^[A-Za-z0-9._@-]{1,64}$"},
    "password": {"type": "string", "minLength": 8},
    "role": {"type": "string", "enum": ["user", "admin"], "default": "user"},
    "quotas": QUOTAS_BODY}}
ACL_BODY = {"type": "object", "required": ["user", "permissions"], "properties": {
    "user": {"type": "string"},
    "permissions": {"type": "array", "items": {"type": "string", "enum": ["read", "write"]},
                    "description": "an empty list revokes"}}}


@route("POST", "/v1/auth/token", "Exchange a username and password for an access token (JWT)", access="public",
       body={"type": "object", "required": ["username", "password"],
             "properties": {"username": {"type": "string"}, "password": {"type": "string"}}},
       responses={"200": "{access_token, token_type, expires_in}", "401": "Wrong username or password",
                  "429": "Too many failed logins for this username, or for it from this address "
                  "(Retry-After)"})
async def issue_token(request: web.Request) -> web.Response:
    return json_response(await request.app[NODE].auth.login(await read_json(request), client_address(request)))


@route("POST", "/v1/users", "Create a user (admin)", access="admin", body=USER_BODY,
       responses={"201": "Created", "400": "Invalid", "403": "Not an admin", "409": "Exists"})
async def create_user(request: web.Request) -> web.Response:
    return json_response(await request.app[NODE].auth.create_user(await read_json(request)), status=201)


@route("GET", "/v1/users", "List users (admin), each with the bytes they store and their storage limit",
       access="admin")
async def list_users(request: web.Request) -> web.Response:
    node = request.app[NODE]
    users = await node.coordinator.list_users()
    return json_response({"users": [{**u.public(), "storage": await node.storage.describe(u.name)}
                                        for u in users]})


@route("GET", "/v1/users/{name}", "One user (that user or an admin), with the bytes stored in what they own "
       "(storage.used_bytes, cluster-wide, seconds stale at most) and their limit (storage.limit_bytes, 0: none)",
       access="self", responses={"200": "OK", "403": "Not allowed", "404": "Unknown user"})
async def get_user(request: web.Request) -> web.Response:
    node = request.app[NODE]
    user = await node.auth.user(request.match_info["name"])
    return json_response({**user.public(), "storage": await node.storage.describe(user.name)})


@route("DELETE", "/v1/users/{name}", "Delete a user (admin); refused while they own topics unless reassign_to",
       access="admin", query=(("reassign_to", "string", "the user who takes over their topics"),),
       responses={"200": "Deleted", "404": "Unknown user", "409": "Owns topics"})
async def delete_user(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    moved = await request.app[NODE].auth.delete_user(principal_of(request), name, request.query.get("reassign_to"))
    return json_response({"deleted": name, "reassigned_topics": moved})


@route("PUT", "/v1/users/{name}/password",
       "Change a password: your own (with your current password; a few tries a minute) or, as an admin, "
       "another user's", access="self",
       body={"type": "object", "required": ["password"], "properties": {
           "password": {"type": "string", "minLength": 8, "description": "the new password"},
           "current_password": {"type": "string", "description": "required to change your own password"}}},
       responses={"204": "Changed; the user's earlier tokens are refused",
                  "400": "Invalid (current_password missing when changing your own)",
                  "403": "Not allowed, or current_password is wrong", "404": "Unknown user",
                  "429": "Too many password changes of this user (Retry-After)"})
async def change_password(request: web.Request) -> web.Response:
    await request.app[NODE].auth.change_password(principal_of(request), request.match_info["name"],
                                                 await read_json(request))
    return web.Response(status=204)


@route("PUT", "/v1/users/{name}/quotas", "Set a user's quotas (admin)", access="admin",
       body=QUOTAS_BODY, responses={"200": "The user", "400": "Invalid", "404": "Unknown"})
async def set_quotas(request: web.Request) -> web.Response:
    auth = request.app[NODE].auth
    return json_response(await auth.set_quotas(request.match_info["name"], await read_json(request)))


@route("GET", "/v1/users/{name}/topics", "What a user owns and is granted (that user or an admin)", access="self",
       responses={"200": "{user, topics, grants}", "403": "Not allowed", "404": "Unknown user"})
async def user_topics(request: web.Request) -> web.Response:
    return json_response(await request.app[NODE].auth.topics_of(request.match_info["name"]))


@route("GET", "/v1/topics/{name}/acl", "The owner and grants of a topic (owner or admin)", access="manage",
       responses={"200": "{topic, owner, acl}", "403": "Not allowed", "404": "Unknown topic"})
async def get_acl(request: web.Request) -> web.Response:
    return json_response(await request.app[NODE].auth.describe_acl(path_topic(request)))


@route("PUT", "/v1/topics/{name}/acl", "Grant or revoke a user's read/write permissions (owner or admin)",
       access="manage", body=ACL_BODY,
       responses={"200": "{topic, owner, acl}", "400": "Invalid", "403": "Not allowed", "404": "Unknown"})
async def set_acl(request: web.Request) -> web.Response:
    auth = request.app[NODE].auth
    return json_response(await auth.set_acl(path_topic(request), await read_json(request)))


@route("PUT", "/v1/topics/{name}/owner", "Give a topic to another user (admin)", access="admin",
       body={"type": "object", "required": ["owner"], "properties": {"owner": {"type": "string"}}},
       responses={"200": "{topic, owner, acl}", "400": "Invalid", "404": "Unknown topic or user"})
async def set_owner(request: web.Request) -> web.Response:
    body = await read_json(request)
    owner = body.get("owner") if isinstance(body, dict) else None
    node = request.app[NODE]
    if not isinstance(owner, str):
        raise InvalidRequestError("the body must be {\"owner\": user name}")
    topic = path_topic(request)
    await node.coordinator.set_owner(topic, owner)
    return json_response(await node.auth.describe_acl(topic))


@route("POST", "/v1/users/{name}/revoke-tokens", "Refuse every token issued to a user so far (admin)",
       access="admin", responses={"200": "{user, credential_version}", "403": "Not an admin", "404": "Unknown user"})
async def revoke_tokens(request: web.Request) -> web.Response:
    return json_response(await request.app[NODE].auth.revoke_tokens(request.match_info["name"]))

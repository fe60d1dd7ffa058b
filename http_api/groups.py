"""Consumer groups: membership (join, heartbeat, leave), offset commits, describe, list, reset,
and groups as resources (decision 0170): the first join claims a group, its owner grants ``read``
(``/acl``) and deletes it when empty. The route table's ``group_*`` access levels check the group;
the front door checks the topics a call names (``BrokerApi.authorize_each``)."""

from __future__ import annotations

import time
from typing import Any, Final

from aiohttp import web

from http_api.auth import call_context, principal_of
from http_api.identity import caller
from http_api.json_codec import json_response
from http_api.keys import FRONT_DOOR, NODE
from http_api.params import query_int, read_json
from http_api.routing import route
from logbroker.auth.groups import LIST_SCAN_NAMES_MAX, SEALED_PREFIX, restricted_view
from logbroker.errors import ForbiddenError
from logbroker.groups.live import live_group, merged_summary, merged_view
from logbroker.groups.requests import CommitRequest, JoinRequest, group_name, parse_commit, parse_join, parse_reset

GROUP_PATH = "/v1/groups/{group}"
LIST_LIMIT_DEFAULT: Final = 1_000
LIST_LIMIT_MAX: Final = 10_000
JOIN_BODY = {"type": "object", "required": ["topics"], "properties": {
    "topics": {"type": "array", "items": {"type": "string"}},
    "session_timeout_ms": {"type": "integer", "minimum": 100, "maximum": 300000, "default": 10000},
    "assignment_strategy": {"type": "string", "enum": ["range", "round_robin", "sticky"]},
    "member_id": {"type": "string", "description": "rejoin with this id (after a 404 a new id is given)"}}}
COMMIT_BODY = {"type": "object", "required": ["offsets"], "properties": {
    "member_id": {"type": "string", "description": "the committing member; leave out (with generation) to "
                                                   "commit for a group that has no members"},
    "generation": {"type": "integer"},
    "offsets": {"type": "array", "items": {"type": "object", "properties": {
        "topic": {"type": "string"}, "partition": {"type": "integer"}, "offset": {"type": "integer"}}}},
    "sequence": {"type": "integer", "minimum": 0,
                 "description": "the member's number for this commit, increasing with each commit it sends: a "
                                "partition whose offset a later-numbered commit of the member wrote is left "
                                "as it is and listed in the answer's superseded"}}}
RESET_BODY = {"type": "object", "required": ["topic", "to"], "properties": {
    "topic": {"type": "string"}, "to": {"type": "string", "enum": ["earliest", "latest", "timestamp", "offsets"]},
    "partitions": {"type": "array", "items": {"type": "integer"}}, "timestamp": {"type": "integer"},
    "offsets": {"type": "array", "items": {"type": "object"}}}}
GROUP_ACL_BODY = {"type": "object", "required": ["user", "permissions"], "properties": {
    "user": {"type": "string"},
    "permissions": {"type": "array", "items": {"type": "string", "enum": ["read"]},
                    "description": "read: join, heartbeat, leave, commit, stream; an empty list revokes"}}}


def _group(request: web.Request) -> str:
    return group_name(request.match_info["group"])


@route("GET", "/v1/groups", "List the consumer groups the caller owns or holds a grant on (admins: all), by "
       f"name, a page at a time: `next_after` is present when more may follow. A call looks at no more than "
       f"{LIST_SCAN_NAMES_MAX} names, so a page can be short, even empty, and still have a `next_after`",
       access="user",
       query=(("limit", "integer", f"groups per page (1 to {LIST_LIMIT_MAX}, default {LIST_LIMIT_DEFAULT})"),
              ("after", "string", "the next_after of the previous page: list the groups named after it (a "
                                  "group name, or a sealed cursor starting with ~)")),
       responses={"200": "{groups: [{group, state, generation, strategy, members}], next_after?}",
                  "400": "Invalid limit or after"})
async def list_groups(request: web.Request) -> web.Response:
    node = request.app[NODE]
    limit = query_int(request, "limit", default=LIST_LIMIT_DEFAULT, low=1, high=LIST_LIMIT_MAX)
    after = request.query.get("after")
    if after is not None:
        after = node.group_access.unseal(after) if after.startswith(SEALED_PREFIX) else group_name(after)
    names, next_after = await node.group_access.visible_page(principal_of(request), node.groups.names_after,
                                                             after, limit)
    now = time.time_ns() // 1_000_000
    body: dict[str, Any] = {"groups": [merged_summary(summary, live_group(node.live_groups, summary["group"], now))
                                       for summary in node.groups.summaries(names)]}
    if next_after is not None:
        body["next_after"] = next_after
    return json_response(body)


@route("GET", GROUP_PATH, "Describe a group: members, assignment, committed offsets and lag (owner and admins; "
       "a grantee sees only their own members and the topics they may read)", access="group_describe",
       responses={"200": "OK", "403": "Not allowed (or unknown, to non-admins)", "404": "Unknown group"})
async def describe_group(request: web.Request) -> web.Response:
    node, name, principal = request.app[NODE], _group(request), principal_of(request)
    view = merged_view(node.groups.describe(name), live_group(node.live_groups, name, time.time_ns() // 1_000_000))
    if node.group_access.is_manager(principal, await node.coordinator.get_group(name)):
        return json_response(view)

    async def readable(topic: str) -> bool:
        try:
            await node.auth.authorize_topic(principal, topic, "read")
        except ForbiddenError:
            return False
        return True

    return json_response(await restricted_view(view, principal.name, readable))


@route("DELETE", GROUP_PATH, "Delete an empty group and its committed offsets (owner or admin)",
       access="group_manage", responses={"204": "Deleted", "403": "Not allowed", "404": "Unknown group",
                                         "409": "The group has members"})
async def delete_group(request: web.Request) -> web.Response:
    await request.app[NODE].delete_group(_group(request))
    return web.Response(status=204)


@route("GET", GROUP_PATH + "/acl", "The owner and grants of a group (owner or admin)", access="group_manage",
       responses={"200": "{group, owner, acl}", "403": "Not allowed"})
async def get_group_acl(request: web.Request) -> web.Response:
    return json_response(await request.app[NODE].group_access.describe_acl(_group(request)))


@route("PUT", GROUP_PATH + "/acl", "Grant or revoke a user's read permission on a group (owner or admin)",
       access="group_manage", body=GROUP_ACL_BODY,
       responses={"200": "{group, owner, acl}", "400": "Invalid", "403": "Not allowed",
                  "404": "Unknown user, or a group nobody has joined yet"})
async def set_group_acl(request: web.Request) -> web.Response:
    return json_response(await request.app[NODE].group_access.set_acl(_group(request), await read_json(request)))


@route("POST", GROUP_PATH + "/members", "Join a group (starts a new generation); the first join claims the group",
       access="group_read", body=JOIN_BODY,
       responses={"200": "member_id, generation, assignment, heartbeat_interval_ms", "400": "Invalid",
                  "403": "No read grant on the group or a topic, or another user's member_id",
                  "404": "Unknown topic", "409": "Inconsistent assignment strategy"}, front_door="group_join")
async def join_group(request: web.Request) -> web.Response:
    async def join() -> JoinRequest:
        return parse_join(await read_json(request))
    return json_response(await request.app[FRONT_DOOR].group_join(call_context(request), request.match_info["group"],
                                                                  join))


@route("POST", GROUP_PATH + "/members/{member}/heartbeat", "Heartbeat: the current generation and assignment",
       access="group_read",
       responses={"200": "generation, assignment", "404": "Unknown group or member (join again)"},
       front_door="group_heartbeat")
async def heartbeat(request: web.Request) -> web.Response:
    return json_response(await request.app[FRONT_DOOR].group_heartbeat(
        call_context(request), request.match_info["group"], request.match_info["member"]))


@route("DELETE", GROUP_PATH + "/members/{member}", "Leave a group (starts a new generation)", access="group_read",
       responses={"204": "Left", "404": "Unknown group or member"}, front_door="group_leave")
async def leave_group(request: web.Request) -> web.Response:
    await request.app[FRONT_DOOR].group_leave(call_context(request), request.match_info["group"],
                                              request.match_info["member"])
    return web.Response(status=204)


@route("POST", GROUP_PATH + "/offsets", "Commit offsets (a member of the current generation; without a member, "
       "for a group that has none)",
       access="group_read",
       body=COMMIT_BODY, responses={"200": "Committed", "400": "Invalid", "404": "Unknown member",
                                    "409": "Stale generation, partition not assigned, or (without a member) "
                                           "the group has members"}, front_door="group_commit")
async def commit_offsets(request: web.Request) -> web.Response:
    async def commit() -> CommitRequest:
        return parse_commit(await read_json(request))
    return json_response(await request.app[FRONT_DOOR].group_commit(call_context(request),
                                                                    request.match_info["group"], commit))


@route("POST", GROUP_PATH + "/offsets/reset", "Reset a group's offsets for a topic (the group must have no members)",
       access="admin",
       body=RESET_BODY, responses={"200": "The new offsets", "400": "Invalid", "404": "Unknown topic",
                                   "409": "The group has members"})
async def reset_offsets(request: web.Request) -> web.Response:
    name = _group(request)
    reset = parse_reset(await read_json(request))
    return json_response(await request.app[NODE].groups.reset(name, reset, caller(request)))

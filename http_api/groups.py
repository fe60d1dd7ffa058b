"""Consumer groups: membership (join, heartbeat, leave), offset commits, describe, list, reset."""

from __future__ import annotations

from aiohttp import web

from http_api.identity import caller, group_caller, require_read
from http_api.keys import NODE
from http_api.params import read_json
from http_api.routing import route
from logbroker.groups.requests import group_name, member_id, parse_commit, parse_join, parse_reset

GROUP_PATH = "/v1/groups/{group}"
JOIN_BODY = {"type": "object", "required": ["topics"], "properties": {
    "topics": {"type": "array", "items": {"type": "string"}},
    "session_timeout_ms": {"type": "integer", "minimum": 100, "maximum": 300000, "default": 10000},
    "assignment_strategy": {"type": "string", "enum": ["range", "round_robin", "sticky"]},
    "member_id": {"type": "string", "description": "rejoin with this id (after a 404 a new id is given)"}}}
COMMIT_BODY = {"type": "object", "required": ["member_id", "generation", "offsets"], "properties": {
    "member_id": {"type": "string"}, "generation": {"type": "integer"},
    "offsets": {"type": "array", "items": {"type": "object", "properties": {
        "topic": {"type": "string"}, "partition": {"type": "integer"}, "offset": {"type": "integer"}}}}}}
RESET_BODY = {"type": "object", "required": ["topic", "to"], "properties": {
    "topic": {"type": "string"}, "to": {"type": "string", "enum": ["earliest", "latest", "timestamp", "offsets"]},
    "partitions": {"type": "array", "items": {"type": "integer"}}, "timestamp": {"type": "integer"},
    "offsets": {"type": "array", "items": {"type": "object"}}}}


def _group(request: web.Request) -> str:
    return group_name(request.match_info["group"])


@route("GET", "/v1/groups", "List consumer groups", access="user")
async def list_groups(request: web.Request) -> web.Response:
    return web.json_response({"groups": request.app[NODE].groups.list_groups()})


@route("GET", GROUP_PATH, "Describe a group: members, assignment, committed offsets and lag", access="user",
       responses={"200": "OK", "404": "Unknown group"})
async def describe_group(request: web.Request) -> web.Response:
    return web.json_response(request.app[NODE].groups.describe(_group(request)))


@route("POST", GROUP_PATH + "/members", "Join a group (starts a new generation)", access="user", body=JOIN_BODY,
       responses={"200": "member_id, generation, assignment, heartbeat_interval_ms", "400": "Invalid",
                  "404": "Unknown topic", "409": "Inconsistent assignment strategy"})
async def join_group(request: web.Request) -> web.Response:
    name = _group(request)
    join = parse_join(await read_json(request))
    await require_read(request, join.topics)
    return web.json_response(await request.app[NODE].groups.join(name, join, caller(request)))


@route("POST", GROUP_PATH + "/members/{member}/heartbeat", "Heartbeat: the current generation and assignment",
       access="user",
       responses={"200": "generation, assignment", "404": "Unknown group or member (join again)"})
async def heartbeat(request: web.Request) -> web.Response:
    name, member = _group(request), member_id(request.match_info["member"])
    return web.json_response(await request.app[NODE].groups.heartbeat(name, member, group_caller(request)))


@route("DELETE", GROUP_PATH + "/members/{member}", "Leave a group (starts a new generation)", access="user",
       responses={"204": "Left", "404": "Unknown group or member"})
async def leave_group(request: web.Request) -> web.Response:
    name, member = _group(request), member_id(request.match_info["member"])
    await request.app[NODE].groups.leave(name, member, group_caller(request))
    return web.Response(status=204)


@route("POST", GROUP_PATH + "/offsets", "Commit offsets (member of the current generation only)", access="user",
       body=COMMIT_BODY, responses={"200": "Committed", "400": "Invalid", "404": "Unknown member",
                                    "409": "Stale generation or partition not assigned"})
async def commit_offsets(request: web.Request) -> web.Response:
    name = _group(request)
    commit = parse_commit(await read_json(request))
    await require_read(request, (t for t, _, _ in commit.offsets))
    return web.json_response(await request.app[NODE].groups.commit(name, commit, group_caller(request)))


@route("POST", GROUP_PATH + "/offsets/reset", "Reset a group's offsets for a topic (the group must have no members)",
       access="admin",
       body=RESET_BODY, responses={"200": "The new offsets", "400": "Invalid", "404": "Unknown topic",
                                   "409": "The group has members"})
async def reset_offsets(request: web.Request) -> web.Response:
    name = _group(request)
    reset = parse_reset(await read_json(request))
    return web.json_response(await request.app[NODE].groups.reset(name, reset, caller(request)))

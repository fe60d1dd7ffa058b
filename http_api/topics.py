"""Topic and queue administration: create, list, describe, delete, add partitions, change config.
Creating, deleting, adding partitions and changing config go through the broker's front door
(``logbroker.api.BrokerApi``: owner, holding limits, authorization), as Kafka's admin APIs do."""

from __future__ import annotations

from aiohttp import web

from coordinator.models import PARTITIONS_MAX
from http_api.auth import call_context, principal_of
from http_api.json_codec import json_response
from http_api.keys import FRONT_DOOR, NODE
from http_api.params import path_topic, query_flag, read_json
from http_api.routing import route

PARTITION_BUDGET_FULL = "The node holds as many partitions as its descriptor limit allows (delete topics)"

TOPIC_BODY = {
    "type": "object", "required": ["name"],
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,200}$"},
        "partitions": {"type": "integer", "minimum": 1, "maximum": PARTITIONS_MAX, "default": 1},
        "replication_factor": {"type": "integer", "minimum": 1},
        "kind": {"type": "string", "enum": ["topic", "queue"], "default": "topic"},
        "config": {"type": "object", "description": "segment_bytes, segment_ms, retention_ms, retention_bytes, "
                   "flush (always|interval|never), flush_ms, max_batch_bytes, leader_racks (racks for the "
                   "leaders, first preferred), ...; queues: max_deliveries, dead_letter_topic"},
    },
}


@route("POST", "/v1/topics", "Create a topic or queue; the caller becomes its owner", access="user",
       body=TOPIC_BODY, responses={"201": "Created", "400": "Invalid", "409": "Exists",
                                   "429": "Past the caller's topics_max or partitions_max",
                                   "503": PARTITION_BUDGET_FULL})
async def create_topic(request: web.Request) -> web.Response:
    body = await read_json(request)
    described = await request.app[FRONT_DOOR].create_topic(call_context(request), body)
    return json_response(described, status=201)


@route("GET", "/v1/topics", "List the topics and queues the caller may see", access="user",
       query=(("internal", "boolean", "true: also the broker's internal __ topics"),))
async def list_topics(request: web.Request) -> web.Response:
    topics = await request.app[NODE].topics.list_topics(principal_of(request),
                                                        internal=query_flag(request, "internal", default=False))
    return json_response({"topics": topics})


@route("GET", "/v1/topics/{name}", "Describe a topic: partitions, leaders, offsets, config", access="describe",
       query=(("offsets", "boolean", "false: the placement alone (leaders, replicas, in-sync replicas), "
                                     "without the offsets and sizes that each partition's leader is asked for"),),
       responses={"200": "OK", "403": "Not allowed", "404": "Unknown topic"})
async def describe_topic(request: web.Request) -> web.Response:
    offsets = query_flag(request, "offsets", default=True)
    return json_response(await request.app[NODE].topics.describe_topic(path_topic(request), offsets=offsets))


@route("DELETE", "/v1/topics/{name}", "Delete a topic and its data (owner or admin)", access="manage",
       responses={"204": "Deleted", "403": "Not allowed", "404": "Unknown"})
async def delete_topic(request: web.Request) -> web.Response:
    await request.app[FRONT_DOOR].delete_topic(call_context(request), path_topic(request))
    return web.Response(status=204)


@route("POST", "/v1/topics/{name}/partitions", "Add partitions to a topic or queue (consumer groups rebalance)",
       access="manage", body={"type": "object", "required": ["partitions"],
                              "properties": {"partitions": {"type": "integer", "maximum": PARTITIONS_MAX,
                                                             "description": "the new count"}}},
       responses={"200": "The topic", "400": "Not more than now, or an internal topic", "404": "Unknown topic",
                  "429": "Past the caller's partitions_max", "503": PARTITION_BUDGET_FULL})
async def add_partitions(request: web.Request) -> web.Response:
    body, topic = await read_json(request), path_topic(request)
    return json_response(await request.app[FRONT_DOOR].add_partitions(call_context(request), topic, body))


CONFIG_CHANGE_BODY = {
    "type": "object", "minProperties": 1,
    "description": "The config keys to change and their new values (null: back to the default); the rules of "
                   "topic creation apply. Fixed on a live topic: partitions (see /partitions), replication_factor, "
                   "segment_index_bytes, dead_letter_topic; max_batch_bytes may only grow.",
    "additionalProperties": True,
    "example": {"retention_ms": 3600000, "min_insync_replicas": 2},
}


@route("PATCH", "/v1/topics/{name}/config", "Change a live topic's or queue's config (owner or admin)",
       access="manage", body=CONFIG_CHANGE_BODY,
       responses={"200": "The topic as described after the change", "400": "An unknown key, a value of the wrong "
                  "type or out of bounds, or a key that cannot change live (the problem names it)",
                  "403": "Not the owner or an admin", "404": "Unknown topic"})
async def alter_topic_config(request: web.Request) -> web.Response:
    body, topic = await read_json(request), path_topic(request)
    return json_response(await request.app[FRONT_DOOR].alter_topic_config(call_context(request), topic, body))

"""``GET /v1/usage``: usage records for analytics and billing (decision 0298).

An admin sees every user's rows (or one user's with ``?user=``); anyone else sees their own. The
node writes its own unwritten counts first, so its own traffic is never behind the answer; other
nodes' are at most one write round (the node setting ``usage_flush_ms``) behind. JSON by default,
CSV with ``Accept: text/csv``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Final

from aiohttp import web

from coordinator.users import validate_user_name
from http_api.auth import principal_of
from http_api.json_codec import json_response
from http_api.keys import NODE
from http_api.params import query_int
from http_api.routing import route
from logbroker.errors import ANY_ERROR, ForbiddenError, InvalidRequestError
from logbroker.metering.ledger import DAY_MS, HOUR_MS
from logbroker.metering.report import Period, TooManyRowsError, merge, to_csv

CSV: Final = "text/csv"
OWN_WRITE_WAIT_S: Final = 5.0
log = logging.getLogger(__name__)
PERIODS: Final[dict[str, Period]] = {"hour": "hour", "day": "day"}
RANGE_DAYS_MAX: Final = 400
DEFAULT_RANGE_MS: Final = DAY_MS


@route("GET", "/v1/usage", "Usage per user, topic and hour or day (admins: everyone's; others: their own)",
       access="user",
       query=(("from", "integer", "start, ms since the epoch (default: a day before to)"),
              ("to", "integer", "end, ms since the epoch, exclusive (default: now)"),
              ("by", "string", "hour (default) or day"),
              ("user", "string", "an admin's filter: this user's rows only")),
       responses={"200": "{usage: [{user, topic, start_ms, bytes_in, records_in, bytes_out, records_out, requests, "
                         "stream_seconds, storage_bytes}]} (text/csv with Accept: text/csv)",
                  "400": "Bad range, period or user name", "403": "Another user's usage (admins only)"})
async def usage(request: web.Request) -> web.Response:
    node = request.app[NODE]
    principal = principal_of(request)
    now = time.time_ns() // 1_000_000
    to_ms = query_int(request, "to", default=now)
    from_ms = query_int(request, "from", default=max(0, to_ms - DEFAULT_RANGE_MS))
    by = PERIODS.get(request.query.get("by", "hour"))
    if by is None:
        raise InvalidRequestError(f"by must be hour or day, not {request.query.get('by', '')[:20]!r}")
    if from_ms > to_ms or to_ms - from_ms > RANGE_DAYS_MAX * DAY_MS:
        raise InvalidRequestError(f"from must not be after to, and the range at most {RANGE_DAYS_MAX} days")
    who = request.query.get("user")
    if who is not None:
        validate_user_name(who)
        if who != principal.name and not principal.is_admin and node.auth.enabled:
            raise ForbiddenError(f"{principal.name!r} may only see their own usage")
    elif not principal.is_admin and node.auth.enabled:
        who = principal.name
    retention_days = node.config.usage_retention_days
    if retention_days:  # nothing older is kept: do not read for it
        from_ms = max(from_ms, now - retention_days * DAY_MS - DAY_MS)
    try:  # this node's own counts first, so its own traffic is never behind the answer
        await asyncio.wait_for(node.usage.flush(), OWN_WRITE_WAIT_S)
    except (TimeoutError, *ANY_ERROR) as exc:  # the stored records still answer
        log.warning("usage: this node's counts could not be written before the answer",
                    extra={"fields": {"error": str(exc) or type(exc).__name__}})
    period = HOUR_MS if by == "hour" else DAY_MS
    first_hour = from_ms - from_ms % period
    records = await node.coordinator.usage_between(first_hour, to_ms)
    try:  # off the loop: a wide range is many records to merge
        rows = await asyncio.to_thread(merge, records, from_ms=from_ms, to_ms=max(from_ms, to_ms), by=by, user=who)
    except TooManyRowsError as exc:
        raise InvalidRequestError(str(exc)) from exc
    if CSV in request.headers.get("Accept", ""):
        return web.Response(text=to_csv(rows), content_type=CSV)
    return json_response({"usage": rows})

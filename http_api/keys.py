"""Typed keys of the application state."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import aiohttp
from aiohttp import web

from http_api.sendfile import SendfileGate
from http_api.stream_budget import StreamBudget
from logbroker.api import BrokerApi
from logbroker.node import Node

NODE = web.AppKey("node", Node)
FRONT_DOOR = web.AppKey("front_door", BrokerApi)  # the one BrokerApi of the node, for every handler
SENDFILE = web.AppKey("sendfile", SendfileGate)
EXECUTOR = web.AppKey("executor", ThreadPoolExecutor)
STREAMS = web.AppKey("streams", StreamBudget)
FORWARDER = web.AppKey("forwarder", aiohttp.ClientSession)

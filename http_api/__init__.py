"""The aiohttp HTTP API (v1): routing, validation, auth, error mapping, long-poll, push."""

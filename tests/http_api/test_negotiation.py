"""Reading ``Accept``: browsers are told apart from API clients by what they name, never by a wildcard."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from http_api.negotiation import prefers_html, weights

CHROME = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
FIREFOX = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.parametrize(("accept", "html"), [
    (CHROME, True), (FIREFOX, True), ("TEXT/HTML", True), ("text/html; charset=utf-8", True),
    (None, False), ("", False), ("*/*", False), ("text/*", False), ("application/json", False),
    ("application/json, text/html;q=0.5", False), ("text/html;q=0", False), ("text/html;q=abc", False),
    ("text/html;q=2", False), ("application/json;q=0.5, text/html", True), ("text/html, application/json", True),
])
def test_a_page_only_for_clients_that_name_html_first(accept, html):
    assert prefers_html(accept) is html


MEDIA = st.sampled_from(["text/html", "application/json", "*/*", "text/*", "application/xml", "image/webp"])
WEIGHT = st.one_of(st.none(), st.sampled_from(["0", "0.1", "0.5", "0.8", "1", "1.0"]))


def header(items: list[tuple[str, str | None]]) -> str:
    return ",".join(media if q is None else f"{media};q={q}" for media, q in items)


@given(st.lists(st.tuples(MEDIA, WEIGHT), max_size=6))
def test_the_answer_follows_the_weights_named(items):
    accept = header(items)
    html = max((1.0 if q is None else float(q) for m, q in items if m == "text/html"), default=0.0)
    json = max((1.0 if q is None else float(q) for m, q in items if m == "application/json"), default=0.0)
    assert prefers_html(accept) is (html > 0 and html >= json)
    assert set(weights(accept)) == {m for m, _ in items}


@given(st.text(max_size=300))
def test_any_header_gets_an_answer_and_without_html_it_is_json(text):
    answer = prefers_html(text)
    if "text/html" not in text.lower():
        assert answer is False


def test_a_huge_header_is_read_only_so_far():
    assert prefers_html("application/xml;q=0.1," * 1000 + "text/html") is False
    assert prefers_html("text/html," + "application/xml;q=0.1," * 1000) is True

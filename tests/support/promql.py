"""What a PromQL expression reads, for tests that check dashboards and alert rules against a
node's scrape: the metric names it selects and the label values it matches exactly.

Not a parser (``promtool`` checks the syntax); a tokenizer that knows where a name cannot be a
metric: strings, label matchers ``{...}``, ranges ``[...]``, the label lists of ``by``,
``without``, ``on``, ``ignoring``, ``group_left`` and ``group_right``, function and aggregation
names, keywords and numbers. Grafana's variables are replaced first by values PromQL accepts.
"""

from __future__ import annotations

import re
from typing import Final

GRAFANA_VARIABLES: Final = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
AGGREGATIONS: Final = frozenset({"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
                                 "bottomk", "topk", "quantile", "limitk", "limit_ratio"})
KEYWORDS: Final = frozenset({"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
                             "offset", "bool", "inf", "nan", "atan2", "start", "end"})
LABEL_LISTS: Final = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
STRING: Final = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
IDENTIFIER: Final = re.compile(r"(?<![\w:.])([a-zA-Z_:][\w:]*)(\s*\()?")
MATCHER: Final = re.compile(r'([a-zA-Z_]\w*)\s*=\s*"((?:[^"\\]|\\.)*)"')
NUMBER_LIKE: Final = re.compile(r"(?<![\w:])\d[\w.]*")  # 5m, 1e3, 0x1f, 1.5 (not metric names)
LABEL_VALUES: Final = re.compile(r"^label_values\(\s*([a-zA-Z_:][\w:]*)\s*,\s*\w+\s*\)$")


def substitute(expr: str) -> str:
    """``expr`` with Grafana's interval variables as durations and ``$name``/``${name}`` as ``.*``
    (dashboards use them only inside ``=~`` matchers)."""
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    return re.sub(r"\$\{?\w+\}?", ".*", expr)


def _blank(pattern: re.Pattern[str], text: str) -> str:
    return pattern.sub(lambda m: " " * len(m.group(0)), text)


def _outside(text: str, opening: str, closing: str) -> str:
    """``text`` with everything between ``opening`` and its ``closing`` (not nested) blanked."""
    out, inside = [], False
    for char in text:
        if char == opening:
            inside = True
        out.append(" " if inside else char)
        if char == closing:
            inside = False
    return "".join(out)


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` selects (a Grafana ``label_values(metric, label)`` query too)."""
    expr = substitute(expr).strip()
    label_values = LABEL_VALUES.match(expr)
    if label_values:
        return {label_values.group(1)}
    text = _blank(STRING, expr)
    text = _outside(_outside(text, "{", "}"), "[", "]")
    text = _blank(LABEL_LISTS, text)
    text = _blank(NUMBER_LIKE, text)
    names = set()
    for match in IDENTIFIER.finditer(text):
        name, call = match.group(1), match.group(2)
        if call or name in AGGREGATIONS or name in KEYWORDS:
            continue
        names.add(name)
    return names


def exact_matchers(expr: str) -> set[tuple[str, str]]:
    """The ``label="value"`` matchers of ``expr`` (not ``=~``, ``!=`` or ``!~``)."""
    text = substitute(expr)
    return {(match.group(1), match.group(2)) for match in MATCHER.finditer(text)
            if text[:match.start()].rstrip().endswith(("{", ","))}

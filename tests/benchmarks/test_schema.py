"""Result documents have the DESIGN §9 shape; anything else is refused with the field named."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.schema import ResultSchemaError, validate_result
from tests.benchmarks.support import document


def valid() -> dict:
    return document("produce", "logbroker", {"produce_100b_records_per_s": [1.0, 2.0, 3.0],
                                             "latency_5000_100b_p99_ms": [0.5, 0.7, 0.6]})


def test_a_harness_document_is_valid_and_survives_json():
    d = valid()
    validate_result(d)
    validate_result(json.loads(json.dumps(d)))
    assert d["figures"]["produce_100b_records_per_s"] == 2.0
    assert d["unit"]["latency_5000_100b_p99_ms_max"] == "ms"


BREAKAGES = [
    ("missing field", lambda d: d.pop("unit"), "missing"),
    ("extra field", lambda d: d.update(extra=1), "unexpected"),
    ("system name", lambda d: d.update(system="Log Broker"), "system"),
    ("empty version", lambda d: d.update(version=""), "version"),
    ("naive time", lambda d: d.update(started_at="2026-11-23T09:00:00"), "time zone"),
    ("not a time", lambda d: d.update(started_at="yesterday"), "ISO"),
    ("machine keys", lambda d: d["machine"].pop("python"), "machine"),
    ("zero cpus", lambda d: d["machine"].update(cpus=0), "cpus"),
    ("bool cpus", lambda d: d["machine"].update(cpus=True), "cpus"),
    ("params type", lambda d: d.update(params=[1]), "params"),
    ("figure without unit", lambda d: d["unit"].pop("produce_100b_records_per_s"), "without a unit"),
    ("unit without figure", lambda d: d["unit"].update(x_ms="ms"), "without a figure"),
    ("nan figure", lambda d: d["figures"].update(produce_100b_records_per_s=float("nan")), "finite"),
    ("string figure", lambda d: d["figures"].update(produce_100b_records_per_s="fast"), "finite"),
    ("median outside", lambda d: d["figures"].update(produce_100b_records_per_s=9.0), "outside"),
    ("lonely min", lambda d: (d["figures"].pop("produce_100b_records_per_s_max"),
                              d["unit"].pop("produce_100b_records_per_s_max")), "only one"),
    ("bad figure name", lambda d: (d["figures"].update({"Bad Name": 1.0}), d["unit"].update({"Bad Name": "s"})),
     "figure name"),
]


@pytest.mark.parametrize(("what", "break_it", "message"), BREAKAGES, ids=[b[0] for b in BREAKAGES])
def test_a_broken_document_is_refused_with_the_field_named(what, break_it, message):
    d = copy.deepcopy(valid())
    break_it(d)
    with pytest.raises(ResultSchemaError, match=message):
        validate_result(d)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                       max_size=3), max_leaves=10)


@given(st.sampled_from(["scenario", "system", "version", "started_at", "machine", "params", "figures", "unit"]),
       json_values)
def test_any_junk_in_any_field_is_refused_or_valid_never_a_crash(field, junk):
    d = copy.deepcopy(valid())
    d[field] = junk
    try:
        validate_result(d)
    except ResultSchemaError:
        return
    # Whatever passed must still be usable by the report: figures numeric with units.
    assert set(d["figures"]) == set(d["unit"])


@given(json_values.filter(lambda v: not isinstance(v, dict)))
def test_a_document_that_is_not_an_object_is_refused(junk):
    with pytest.raises(ResultSchemaError):
        validate_result(junk)

"""Spec reads in Druid's serialized form: the create body of Druid's supervisor API reference,
posted to a real server and read back (GET, ?full, history, suspend, resume), compared field by
field with the responses that reference shows (tests/fixtures/druid_docs, copied from Druid's
docs/api-reference/supervisor-api.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from supervisor.schemas.druid_form import granularity, java_hash_set_order, joda_duration
from tests.specs import spec

BASE = "/druid/indexer/v1/supervisor"
DOCS = Path(__file__).parent.parent / "fixtures" / "druid_docs"
# Where Sluicegate differs from the documented response, and why:
EXPECTED = {
    # Druid 34 writes the supervisor id (PR #18082); the docs' responses predate it
    ("id",): ("<absent>", "social_media"),
    # Druid 28 raised the Kafka default to 15 minutes (PR #14539); the docs show Druid 27's 0
    ("spec", "tuningConfig", "handoffConditionTimeout"): (0, 900_000),
    ("tuningConfig", "handoffConditionTimeout"): (0, 900_000),
}


def load(name: str) -> Any:
    return json.loads((DOCS / name).read_text())


def differences(docs: Any, ours: Any, path: tuple[str, ...] = ()) -> dict[tuple, tuple]:
    """Every field where the two differ: {path: (docs' value, ours)}."""
    if isinstance(docs, dict) and isinstance(ours, dict):
        found: dict[tuple, tuple] = {}
        for key in docs.keys() | ours.keys():
            if key not in docs or key not in ours:
                found[(*path, key)] = (docs.get(key, "<absent>"), ours.get(key, "<absent>"))
            else:
                found |= differences(docs[key], ours[key], (*path, key))
        return found
    if isinstance(docs, list) and isinstance(ours, list) and len(docs) == len(ours):
        found = {}
        for index, (a, b) in enumerate(zip(docs, ours, strict=True)):
            found |= differences(a, b, (*path, str(index)))
        return found
    return {} if docs == ours and type(docs) is type(ours) else {path: (docs, ours)}


def test_the_docs_create_body_reads_back_as_the_docs_show(api: httpx.Client) -> None:
    body, shown = load("social_media_submitted.json"), load("social_media_get.json")
    assert api.post(BASE, json=body).json() == {"id": "social_media"}
    got = api.get(f"{BASE}/social_media")
    assert differences(shown, got.json()) == EXPECTED
    (entry,) = api.get(BASE, params={"full": ""}).json()
    assert differences(shown, entry["spec"]) == EXPECTED
    assert entry["spec"]["tuningConfig"]["type"] == "kafka"  # what Druid's console reads
    assert entry["spec"]["ioConfig"]["topic"] == "social_media"
    (version,) = api.get(f"{BASE}/social_media/history").json()
    assert differences(shown, version["spec"]) == EXPECTED
    assert differences(shown, api.get(f"{BASE}/history").json()["social_media"][0]["spec"]) == (
        EXPECTED
    )
    suspended = api.post(f"{BASE}/social_media/suspend").json()
    assert differences(load("social_media_suspend.json"), suspended) == EXPECTED
    resumed = api.post(f"{BASE}/social_media/resume").json()
    assert differences(shown, resumed) == EXPECTED
    # what was read back, sent back with a change inside `spec`, is that change (Druid ignores
    # the top-level copies when `spec` is given)
    got_back = got.json()
    got_back["spec"]["ioConfig"]["taskCount"] = 3
    assert api.post(BASE, json=got_back).status_code == 200
    again = api.get(f"{BASE}/social_media").json()
    assert again["spec"]["ioConfig"]["taskCount"] == again["ioConfig"]["taskCount"] == 3
    assert differences(got.json(), again) == {
        ("spec", "ioConfig", "taskCount"): (1, 3),
        ("ioConfig", "taskCount"): (1, 3),
    }


def test_fields_set_and_left_out_read_back_in_druid_form(api: httpx.Client) -> None:
    body = spec(
        "forms",
        lateMessageRejectionPeriod="PT1H",
        taskDuration="PT90M",
        startDelay="PT0S",
        stopTaskCount=2,
        consumerGroupOffsets=False,  # Sluicegate's own: written when off
        consumerProperties={"bootstrap.servers": "k:9092", "sasl.password": "hush"},
    )
    schema = body["spec"]["dataSchema"]
    schema["metricsSpec"] = [
        {"type": "count", "name": "rows"},
        {"type": "longSum", "name": "added_sum", "fieldName": "added"},
    ]
    schema["granularitySpec"] = {
        "segmentGranularity": {"type": "period", "period": "PT1H"},
        "queryGranularity": "minute",
    }
    schema["timestampSpec"] = {
        "column": "ts",
        "format": "iso",
        "missingValue": "2026-01-01T00:00:00Z",
    }
    answer = api.post(BASE, json=body)
    assert answer.status_code == 200, answer.text
    got = api.get(f"{BASE}/forms").json()
    io, data = got["ioConfig"], got["dataSchema"]
    assert got["spec"]["ioConfig"] == io and got["spec"]["dataSchema"] == data
    assert (io["taskDuration"], io["startDelay"], io["lateMessageRejectionPeriod"]) == (
        "PT5400S",
        "PT0S",
        "PT3600S",
    )
    assert io["stopTaskCount"] == 2 and io["lateMessageRejectionStartDateTime"] is None
    assert io["consumerGroupOffsets"] is False
    assert io["consumerProperties"]["sasl.password"] == "<masked>"
    assert data["metricsSpec"] == [
        {"type": "count", "name": "rows"},
        {"type": "longSum", "name": "added_sum", "fieldName": "added", "expression": None},
    ]
    excluded = data["dimensionsSpec"]["dimensionExclusions"]
    assert sorted(excluded) == ["__time", "added", "added_sum", "rows", "ts"]
    assert data["granularitySpec"]["segmentGranularity"] == "HOUR"
    assert data["granularitySpec"]["queryGranularity"] == "MINUTE"
    assert data["timestampSpec"]["missingValue"] == "2026-01-01T00:00:00.000Z"


def test_joda_forms() -> None:
    assert [joda_duration(p) for p in ("PT1H", "P1D", "PT1.5S", "PT0S", "P1W")] == [
        "PT3600S",
        "PT86400S",
        "PT1.500S",
        "PT0S",
        "PT604800S",
    ]
    assert granularity("hour") == granularity({"type": "period", "period": "PT1H"}) == "HOUR"
    assert granularity("none") == granularity("NONE") == {"type": "none"}
    assert granularity({"type": "all"}) == {"type": "all"}
    assert granularity({"type": "period", "period": "PT60M"}) == {
        "type": "period",
        "period": "PT60M",
        "timeZone": "UTC",
        "origin": None,
    }
    # java.util.HashSet's order, as two real Druid read-backs show it
    assert java_hash_set_order(["Seizure Time", "__time"]) == ["__time", "Seizure Time"]
    assert java_hash_set_order(["value", "time", "sum_value", "count"]) == [
        "count",
        "sum_value",
        "time",
        "value",
    ]


def test_a_legacy_parser_spec_runs_as_its_input_format_and_says_so(api: httpx.Client) -> None:
    body = spec("legacy")
    del body["spec"]["ioConfig"]["inputFormat"]
    schema = body["spec"]["dataSchema"]
    parser = {
        "type": "string",
        "parseSpec": {
            "format": "json",
            "timestampSpec": schema.pop("timestampSpec"),
            "dimensionsSpec": schema.pop("dimensionsSpec"),
            "flattenSpec": {"fields": [{"type": "path", "name": "city", "expr": "$.geo.city"}]},
        },
    }
    schema["parser"] = parser
    assert api.post(BASE, json=body).status_code == 200
    got = api.get(f"{BASE}/legacy").json()
    assert got["dataSchema"]["parser"] == parser  # as given
    assert got["ioConfig"]["inputFormat"] == {
        "type": "json",
        "flattenSpec": parser["parseSpec"]["flattenSpec"],
    }
    # Druid's DataSchema reads its timestampSpec and dimensionsSpec from the parseSpec, and
    # then writes them (issue 43; test_a_legacy_parser_spec_reads_back_with_druids_defaults)
    assert (
        got["dataSchema"]["timestampSpec"]["column"]
        == parser["parseSpec"]["timestampSpec"]["column"]
    )
    assert got["dataSchema"]["dimensionsSpec"]["includeAllDimensions"] is False
    (warning,) = api.get(f"{BASE}/legacy/status").json()["payload"]["warnings"]
    assert "dataSchema.parser (type string) is deprecated" in warning
    assert "read as ioConfig.inputFormat of type json" in warning
    # read back and sent again (parser and the inputFormat it stands for): the same spec
    got["spec"]["ioConfig"]["taskCount"] = 2
    answer = api.post(BASE, json=got)
    assert answer.status_code == 200, answer.text
    assert api.get(f"{BASE}/legacy").json()["spec"]["ioConfig"]["taskCount"] == 2
    assert api.get(f"{BASE}/wiki/status").status_code == 404


def test_registry_credentials_are_masked_kept_and_need_the_operators_leave(
    settings: Any,
) -> None:
    from supervisor.schemas.secrets import MASK
    from supervisor.testkit.service import RunningService

    body = spec("avro")
    decoder = {
        "type": "schema_registry",
        "url": "http://127.0.0.1:9/apis/ccompat/v7",
        "config": {"basic.auth.credentials.source": "USER_INFO", "basic.auth.user.info": "u:pw"},
        "headers": {"Authorization": "Bearer tok"},
    }
    body["spec"]["ioConfig"]["inputFormat"] = {"type": "avro_stream", "avroBytesDecoder": decoder}
    with RunningService(settings) as service, httpx.Client(base_url=service.url) as api:
        refused = api.post(BASE, json=body)
        assert refused.status_code == 400
        assert refused.json()["errors"][0]["field"] == (
            "spec.ioConfig.inputFormat.avroBytesDecoder.url"
        )
        assert "SLUICEGATE_ALLOWED_SCHEMA_LOCATIONS" in refused.text
    settings.allowed_schema_locations = "http://127.0.0.1:9/"
    with RunningService(settings) as service, httpx.Client(base_url=service.url) as api:
        assert api.post(BASE, json=body).status_code == 200
        got = api.get(f"{BASE}/avro").json()
        shown = got["spec"]["ioConfig"]["inputFormat"]["avroBytesDecoder"]["config"]
        assert shown["basic.auth.user.info"] == MASK and "u:pw" not in json.dumps(got)
        assert "Bearer tok" not in json.dumps(got)  # every header is a credential
        # sent back masked: the stored credentials stay
        got["spec"]["ioConfig"]["taskCount"] = 2
        again = api.post(BASE, json=got)
        assert again.status_code == 200, again.text
        history = api.get(f"{BASE}/avro/history").json()
        assert all("u:pw" not in json.dumps(v) for v in history)
        # masked, but to another registry: refused
        moved = api.get(f"{BASE}/avro").json()
        moved["spec"]["ioConfig"]["inputFormat"]["avroBytesDecoder"]["url"] = (
            "http://127.0.0.1:9/other"
        )
        answer = api.post(BASE, json=moved)
        assert answer.status_code == 400 and "send the credentials again" in answer.text


def test_read_back_and_sent_again_unmodified_is_no_new_version(api: httpx.Client) -> None:
    assert api.post(BASE, json=spec("again")).status_code == 200
    got = api.get(f"{BASE}/again").json()
    assert api.post(BASE, json=got, params={"skipRestartIfUnmodified": "true"}).is_success
    assert len(api.get(f"{BASE}/again/history").json()) == 1
    assert api.post(BASE, json=got).is_success  # without the flag: a version, the same spec
    versions = api.get(f"{BASE}/again/history").json()
    assert len(versions) == 2 and versions[0]["spec"] == versions[1]["spec"]


def test_a_parser_without_a_timestamp_spec_keeps_the_data_schemas(api: httpx.Client) -> None:
    body = spec("partial")
    del body["spec"]["ioConfig"]["inputFormat"]
    body["spec"]["dataSchema"]["parser"] = {"type": "string", "parseSpec": {"format": "json"}}
    assert api.post(BASE, json=body).status_code == 200
    got = api.get(f"{BASE}/partial").json()
    given = body["spec"]["dataSchema"]["timestampSpec"]
    assert got["dataSchema"]["timestampSpec"]["column"] == given["column"]
    assert api.post(BASE, json=got).status_code == 200
    again = api.get(f"{BASE}/partial").json()
    assert again["dataSchema"]["timestampSpec"] == got["dataSchema"]["timestampSpec"]


def test_a_missing_value_that_is_no_time_is_refused(api: httpx.Client) -> None:
    body = spec("missing")
    body["spec"]["dataSchema"]["timestampSpec"]["missingValue"] = "yesterday"
    refused = api.post(BASE, json=body)
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["field"] == "spec.dataSchema.timestampSpec.missingValue"


def test_a_stored_spec_druid_cannot_write_is_read_as_stored() -> None:
    from supervisor.schemas.druid_form import druid_form

    stored = spec("odd")
    stored["spec"]["dataSchema"]["timestampSpec"]["missingValue"] = "not a time"
    assert druid_form(stored) == stored  # never a 500 for an older version's spec


def test_a_legacy_parser_spec_reads_back_with_druids_defaults(api: httpx.Client) -> None:
    """The docs' legacy `parser` (data-formats.md: a string parser, its json parseSpec, the
    wikipedia dimensions and metrics) read back as Druid's DataSchema writes it once it read
    the parseSpec: the parser as given, beside it the timestampSpec and dimensionsSpec with
    Druid's defaults filled in (missingValue null; every dimension in full; the timestamp
    column, `__time` and the metrics' names and inputs excluded; includeAllDimensions and
    useSchemaDiscovery false). Exclusions are a Java HashSet in Druid: compared as a set."""
    body, shown = load("legacy_parser_submitted.json"), load("legacy_parser_read_back.json")
    assert api.post(BASE, json=body).json() == {"id": "wikipedia"}
    got = api.get(f"{BASE}/wikipedia").json()
    schema = got["spec"]["dataSchema"]
    assert sorted(schema["dimensionsSpec"]["dimensionExclusions"]) == sorted(
        shown["dimensionsSpec"]["dimensionExclusions"]
    )
    for part in (schema, shown):
        part["dimensionsSpec"]["dimensionExclusions"] = "(a set, compared above)"
    for key, value in shown.items():
        assert schema[key] == value, key
    # what was read back is accepted as it is, and reads back the same
    got["spec"]["dataSchema"] = api.get(f"{BASE}/wikipedia").json()["spec"]["dataSchema"]
    assert api.post(BASE, json=got).status_code == 200
    assert api.get(f"{BASE}/wikipedia").json()["spec"] == got["spec"]

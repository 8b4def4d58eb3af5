"""Pure parts of the client: error decoding (network input: bounded, never
raises), retry classification, models. The behaviour over HTTP is tested
against a real cluster in test_client_cluster.py."""

from __future__ import annotations

import json
import random

import pytest
import requests
import urllib3.exceptions

import cairn
from cairn._http import _never_sent, normalize_gateway
from cairn.errors import _MAX_MESSAGE, error_from_response
from cairn.models import Capacity, Job, Volume


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (400, "invalid", cairn.Invalid),
        (400, "no_change", cairn.NoChange),
        (401, "unauthorized", cairn.Unauthorized),
        (403, "forbidden", cairn.Forbidden),
        (404, "not_found", cairn.NotFound),
        (409, "already_exists", cairn.AlreadyExists),
        (409, "in_use", cairn.InUse),
        (409, "conflict", cairn.Conflict),
        (412, "conflict", cairn.Conflict),
        (429, "throttled", cairn.Throttled),
        (500, "internal", cairn.Internal),
        (503, "unavailable", cairn.Unavailable),
    ],
)
def test_each_code_has_its_exception(status: int, code: str, cls: type[cairn.ApiError]) -> None:
    body = json.dumps({"code": code, "message": "what to do next", "field": "size"}).encode()
    e = error_from_response(status, body)
    assert type(e) is cls and (e.status, e.code, e.message, e.field) == (status, code, "what to do next", "size")
    assert isinstance(e, cairn.ApiError) and isinstance(e, cairn.CairnError)


def test_a_body_without_code_is_classified_by_status() -> None:
    e = error_from_response(409, b'{"error": "volume v1 is mapped"}')  # an older gateway
    assert type(e) is cairn.Conflict and e.message == "volume v1 is mapped" and e.code == "conflict"
    e = error_from_response(502, b"<html>bad gateway</html>")  # a proxy
    assert type(e) is cairn.Unavailable and "bad gateway" in e.message
    e = error_from_response(418, b"")
    assert type(e) is cairn.ApiError and e.code == "http_418"


def test_error_decoding_is_bounded_and_never_raises() -> None:
    rnd = random.Random(16)  # deterministic: a failure reproduces
    samples = [b"", b"{", b"[]", b'{"code": 5, "message": null, "field": []}', b"\xff\xfe", b'{"message": "' + b"x" * 100000 + b'"}']
    samples += [bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 300))) for _ in range(300)]
    for body in samples:
        for status in (400, 404, 409, 500, 503, 599):
            e = error_from_response(status, body)
            assert isinstance(e, cairn.ApiError) and len(e.message) <= _MAX_MESSAGE and e.status == status


def test_gateway_addresses() -> None:
    assert normalize_gateway(" 10.0.0.5:8443 ") == "https://10.0.0.5:8443"
    assert normalize_gateway("https://gw:8443/api/v1/") == "https://gw:8443"
    with pytest.raises(ValueError, match="empty gateway address"):
        normalize_gateway(" ")
    with pytest.raises(ValueError, match="no gateway address"):
        cairn.Client([], "admin", "pw")
    with pytest.raises(ValueError, match="username and password"):
        cairn.Client(["gw:8443"])


def test_only_requests_that_never_left_are_unsent() -> None:
    refused = requests.ConnectionError(
        urllib3.exceptions.MaxRetryError(None, "/x", urllib3.exceptions.NewConnectionError(None, "refused"))  # type: ignore[arg-type]
    )
    assert _never_sent(refused)
    assert _never_sent(requests.ConnectTimeout())
    reset = requests.ConnectionError(urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError()))
    assert not _never_sent(reset)  # may have been applied
    assert not _never_sent(requests.ReadTimeout())


def test_models_keep_unknown_fields_and_convert_nested() -> None:
    v = Volume.from_dict(
        {"id": "a" * 16, "name": "v1", "size": 8 << 30, "mappings": [{"host_name": "esx1", "lun": 3}], "future_field": 1}, etag='"7"'
    )
    assert v.mappings[0].host_name == "esx1" and v.mappings[0].lun == 3
    assert v.raw["future_field"] == 1 and v.etag == '"7"'
    c = Capacity.from_dict({"raw": 100, "usable": 45, "free": 40})
    assert (c.raw_bytes, c.usable, c.free) == (100, 45, 40)
    j = Job.from_dict(
        {"id": "j", "state": "failed", "object": {"kind": "sds", "name": "sds3"}, "error": {"code": "in_use", "message": "m"}}
    )
    assert j.done and j.object is not None and j.object.name == "sds3"
    assert "failed: m" in str(cairn.JobFailed(j))


def test_sse_events_survive_any_chunking() -> None:
    from cairn._http import parse_sse

    events = [{"id": f"{i:016x}", "message": "m" * i, "kind": "audit"} for i in range(20)]
    stream = b"".join(b"id: %s\nevent: event\ndata: %s\n\n: keepalive\n\n" % (e["id"].encode(), json.dumps(e).encode()) for e in events)
    rnd = random.Random(7)
    for _ in range(50):
        cuts = sorted(rnd.sample(range(1, len(stream)), 30))
        chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
        assert list(parse_sse(chunks)) == events


def test_sse_parser_is_bounded_and_only_raises_api_errors() -> None:
    from cairn._http import parse_sse

    with pytest.raises(cairn.ApiError, match="longer than 1024"):
        list(parse_sse([b"data: " + b"x" * 2000], max_line=1024))
    with pytest.raises(cairn.ApiError, match="longer than 1024"):
        list(parse_sse([(b"data: " + b"x" * 100 + b"\n") * 20], max_line=1024))  # one event of many lines
    rnd = random.Random(9)
    for _ in range(300):
        junk = bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 400))).replace(b"\x00", b"\n")
        try:
            out = list(parse_sse([junk, b"\n\n"], max_line=1024))
        except cairn.ApiError:
            continue
        assert all(isinstance(d, dict) for d in out)

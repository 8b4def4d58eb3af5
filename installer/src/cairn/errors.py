"""Exceptions of the Cairn client: one per error code of the gateway API.

Every error the gateway returns has the body ``{"code", "message", "field"}``
(docs/api.md); :func:`error_from_response` turns it into the subclass of
:class:`ApiError` for its code, keeping the HTTP status, the code, the
server's message and the offending field, so callers branch on the class::

    try:
        client.volumes.create("db1", pool="pool1", size=8 * GiB)
    except cairn.AlreadyExists:
        pass  # created before: fine
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


class CairnError(Exception):
    """Base of everything this package raises."""


class ApiError(CairnError):
    """An error answered by a gateway (or no answer at all: status 0).

    Attributes:
        status: the HTTP status (0 when no gateway answered).
        code: the API's error code, e.g. ``"not_found"``, ``"in_use"``.
        message: the server's message; it says what to do next.
        field: the request field or object the error is about, or None.
    """

    code_name = ""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        where = f" (field {field})" if field else ""
        super().__init__(f"{status} {code}: {message}{where}")


class Invalid(ApiError):
    """400 ``invalid``: the request is malformed or a value is out of range."""

    code_name = "invalid"


class NoChange(Invalid):
    """400 ``no_change``: a PATCH that names no field at all."""

    code_name = "no_change"


class Internal(ApiError):
    """500 ``internal``: a bug in the gateway; its log has the details."""

    code_name = "internal"


class Unauthorized(ApiError):
    """401 ``unauthorized``: wrong credentials, or the token expired and re-login failed."""

    code_name = "unauthorized"


class Forbidden(ApiError):
    """403 ``forbidden``: the user's role does not allow the call."""

    code_name = "forbidden"


class NotFound(ApiError):
    """404 ``not_found``: no such object (``field`` names the reference)."""

    code_name = "not_found"


class AlreadyExists(ApiError):
    """409 ``already_exists``: the name (or IQN, address, path) is taken by a different object.

    A create repeated with the same settings is not an error: it answers the existing object."""

    code_name = "already_exists"


class InUse(ApiError):
    """409 ``in_use``: the object is used by others (a mapped volume, a pool with volumes)."""

    code_name = "in_use"


class Conflict(ApiError):
    """409/412 ``conflict``: a concurrent change, a state that forbids the call, or (412) an If-Match that
    no longer matches; re-read and retry."""

    code_name = "conflict"


class Unavailable(ApiError):
    """503 ``unavailable`` (or status 0): no gateway could serve the call now; retry later."""

    code_name = "unavailable"


class Throttled(ApiError):
    """429 ``throttled``: too many failed logins for this user name or from this address.

    ``retry_after`` is how many seconds the lockout still lasts (the answer's
    ``Retry-After``), or None when the answer had none. Retrying at once only
    meets the lockout again; each further lockout doubles it."""

    code_name = "throttled"
    retry_after: float | None = None


class JobFailed(CairnError):
    """A job ended in state ``failed``; ``job`` is its last state."""

    def __init__(self, job: Any) -> None:
        self.job = job
        err = job.error.get("message") if isinstance(job.error, dict) else job.error
        what = job.object.name if job.object is not None else ""
        super().__init__(f"job {job.id} ({job.kind} {what}) failed: {err or job.message}")


def error_from_job(job: Any) -> ApiError:
    """The ApiError a failed job's ``error`` names, for a call that waited on its job (adding
    a device): the same class a synchronous refusal would raise, e.g. InUse for a disk in use.

    >>> class J: error = {"code": "in_use", "message": "device busy", "field": ""}; message = ""
    >>> e = error_from_job(J()); type(e).__name__, e.status, e.message
    ('InUse', 409, 'device busy')
    """
    err = job.error if isinstance(job.error, dict) else {}
    code = str(err.get("code") or "")
    cls = _BY_CODE.get(code, ApiError)
    field = str(err["field"]) if err.get("field") else None
    message = str(err.get("message") or job.message or "the job failed")[:_MAX_MESSAGE]
    return cls(_STATUS_OF_CODE.get(code, 500), code or "internal", message, field)


class JobTimeout(CairnError):
    """A job did not end within the time the caller gave; it still runs on the cluster."""

    def __init__(self, job: Any, timeout: float) -> None:
        self.job = job
        super().__init__(
            f"job {job.id} ({job.kind}) still {job.state} at {job.percent}% after {timeout:.0f} s; "
            f"it goes on in the cluster: wait again with client.jobs.wait({job.id!r})"
        )


_BY_CODE: dict[str, type[ApiError]] = {
    c.code_name: c
    for c in (Invalid, NoChange, Internal, Unauthorized, Forbidden, NotFound, AlreadyExists, InUse, Conflict, Unavailable, Throttled)
}

# A body without a code (a proxy's error page, an older gateway) is
# classified by its status alone.
_BY_STATUS: dict[int, type[ApiError]] = {
    400: Invalid,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    412: Conflict,
    429: Throttled,
    500: Internal,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
}

# The status each code is answered with (docs/api.md), for a job's error.
_STATUS_OF_CODE: dict[str, int] = {
    "invalid": 400,
    "no_change": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "already_exists": 409,
    "in_use": 409,
    "conflict": 409,
    "throttled": 429,
    "internal": 500,
    "unavailable": 503,
}

# Bounds what is read from an error body into a message.
_MAX_MESSAGE = 4096


def error_from_response(status: int, body: bytes, headers: Mapping[str, str] | None = None) -> ApiError:
    """Build the ApiError for an HTTP error answer (``headers``: its headers, for Retry-After).

    >>> e = error_from_response(404, b'{"code":"not_found","message":"no volume x","field":"ref"}')
    >>> type(e).__name__, e.code, e.field
    ('NotFound', 'not_found', 'ref')
    """
    code, message, field = "", "", None
    try:
        doc = json.loads(body[:65536]) if body else None
    except (ValueError, UnicodeDecodeError):
        doc = None
    if isinstance(doc, dict):
        code = str(doc.get("code") or "")
        message = str(doc.get("message") or doc.get("error") or "")
        f = doc.get("field")
        field = str(f) if f else None
    if not message:
        message = body[:_MAX_MESSAGE].decode("utf-8", "replace").strip() or f"HTTP {status} without a message"
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status, ApiError)
    if not code:
        code = cls.code_name or f"http_{status}"
    err = cls(status, code, message[:_MAX_MESSAGE], field)
    if isinstance(err, Throttled) and headers is not None:
        err.retry_after = _retry_after(headers.get("Retry-After"))
    return err


def _retry_after(v: str | None) -> float | None:
    """Retry-After in seconds; the HTTP-date form and garbage give None.

    >>> _retry_after("30"), _retry_after("-1"), _retry_after("Wed, 21 Oct 2015 07:28:00 GMT")
    (30.0, None, None)
    """
    try:
        n = float((v or "").strip())
    except ValueError:
        return None
    return n if 0 <= n < 86400 * 7 else None

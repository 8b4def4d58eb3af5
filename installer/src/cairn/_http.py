"""The transport: one requests.Session, login, failover and safe retries.

Invariants:

* Every request has a timeout (connect and read).
* A request is repeated (on another gateway, after a backoff) only when
  repeating it cannot do something twice: it was never sent (connection
  refused, connect timeout), or it is idempotent (GET, DELETE, a PUT/PATCH
  carrying If-Match). A POST whose fate is unknown is not repeated here;
  the resource layer makes creates idempotent with a name lookup.
* A 401 on a request that carried a token means the token expired (or the
  session was revoked): log in once more and repeat the request once.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import requests
import urllib3.exceptions

from .errors import ApiError, Unauthorized, Unavailable, error_from_response

log = logging.getLogger("cairn")

API_PREFIX = "/api/v1"
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})
# Statuses that say "this gateway cannot serve now, another may".
RETRY_STATUSES = frozenset({502, 503, 504})
MAX_SSE_LINE = 1 << 20


@dataclass(frozen=True)
class Response:
    """A successful answer: status, headers and decoded JSON body (None if empty)."""

    status: int
    headers: Mapping[str, str]
    body: Any
    gateway: str


def normalize_gateway(addr: str) -> str:
    """``host:port`` or a URL -> ``https://host:port`` without a trailing slash or /api/v1.

    >>> normalize_gateway("10.0.0.5:8443")
    'https://10.0.0.5:8443'
    >>> normalize_gateway("http://127.0.0.1:1/api/v1/")
    'http://127.0.0.1:1'
    """
    a = addr.strip().rstrip("/")
    if not a:
        raise ValueError("empty gateway address: give host:port or https://host:port")
    if "://" not in a:
        a = "https://" + a
    if a.endswith(API_PREFIX):
        a = a[: -len(API_PREFIX)]
    return a


class Session(requests.Session):
    """A requests.Session whose ``verify`` is what every request uses.

    requests lets $REQUESTS_CA_BUNDLE / $CURL_CA_BUNDLE override a session's
    ``verify`` (a CA file, or False) unless each call passes it again; this
    class passes it, so the TLS policy the caller set is the one applied.
    """

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("verify", self.verify)
        return super().request(method, url, *args, **kwargs)


def parse_sse(chunks: Iterable[bytes], max_line: int = MAX_SSE_LINE) -> Iterator[dict[str, Any]]:
    r"""The JSON objects in the ``data:`` fields of a server-sent event stream.

    Events end at an empty line; comments (``: keepalive``) and other fields
    are skipped, as are data that are not a JSON object. A line longer than
    ``max_line`` (a broken or hostile server) raises ApiError.

    >>> list(parse_sse([b"id: 1\nevent: event\nda", b'ta: {"id":"1"}\n\n: keepalive\n\n']))
    [{'id': '1'}]
    """
    buf = b""
    data: list[bytes] = []
    for chunk in chunks:
        buf += chunk
        while True:
            line, sep, rest = buf.partition(b"\n")
            if not sep:
                break
            buf = rest
            line = line.rstrip(b"\r")
            if len(line) > max_line:
                raise ApiError(0, "invalid_response", f"event stream line longer than {max_line} bytes")
            if not line:
                if data:
                    try:
                        doc = json.loads(b"\n".join(data))
                    except (ValueError, UnicodeDecodeError):
                        doc = None
                    data = []
                    if isinstance(doc, dict):
                        yield doc
            elif line.startswith(b"data:"):
                data.append(line[5:].lstrip())
                if sum(len(d) for d in data) > max_line:
                    raise ApiError(0, "invalid_response", f"event stream event longer than {max_line} bytes")
        if len(buf) > max_line:
            raise ApiError(0, "invalid_response", f"event stream line longer than {max_line} bytes")


def _never_sent(exc: requests.RequestException) -> bool:
    """True when the request certainly did not reach the server."""
    if isinstance(exc, requests.ConnectTimeout):
        return True
    if not isinstance(exc, requests.ConnectionError):
        return False
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, (urllib3.exceptions.NewConnectionError, urllib3.exceptions.ConnectTimeoutError)):
            return True
        if isinstance(e, urllib3.exceptions.MaxRetryError):
            stack.append(e.reason)
        stack.extend([e.__cause__, e.__context__])
        stack.extend(a for a in e.args if isinstance(a, BaseException))
    return False


class Transport:
    """Sends API calls to the first gateway that answers; logs in on demand."""

    def __init__(
        self,
        gateways: Sequence[str],
        username: str | None,
        password: str | None,
        *,
        verify: bool | str = True,
        timeout: float = 30.0,
        connect_timeout: float = 5.0,
        retries: int = 4,
        backoff: float = 0.25,
        token: str | None = None,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not gateways:
            raise ValueError("no gateway address given: pass gateways=['host:8443', ...]")
        if token is None and not (username and password):
            raise ValueError("give username and password (or a token) to log in to the gateway")
        self.gateways = [normalize_gateway(g) for g in gateways]
        self.username, self._password = username, password
        self.timeout = (connect_timeout, timeout)
        self.retries, self.backoff = retries, backoff
        self._sleep = sleep
        self._session = session or Session()
        self._session.verify = verify
        self._session.headers["Accept"] = "application/json"
        self._session.headers["User-Agent"] = "cairn-python"
        self._token = token
        self._lock = threading.Lock()
        self._current = 0  # index of the gateway that answered last

    def close(self) -> None:
        self._session.close()

    @property
    def token(self) -> str | None:
        return self._token

    @property
    def current_gateway(self) -> str:
        return self.gateways[self._current]

    def login(self) -> None:
        """Log in (POST /login) and keep the token; raises Unauthorized on wrong credentials."""
        if not (self.username and self._password):
            raise Unauthorized(401, "unauthorized", "the token expired and no password was given to log in again")
        r = self._send(
            "POST", "/login", json_body={"username": self.username, "password": self._password}, auth=False, retry_unsent_only=False
        )
        token = r.body.get("token") if isinstance(r.body, dict) else None
        if not token:
            raise ApiError(r.status, "invalid_response", f"gateway {r.gateway} answered the login without a token")
        with self._lock:
            self._token = str(token)

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: Mapping[str, Any] | None = None,
        if_match: str | None = None,
        data: bytes | None = None,
        content_type: str | None = None,
    ) -> Response:
        """Send one API call (path relative to /api/v1) and return its answer or raise ApiError.

        The body is ``json_body`` as JSON, or ``data`` as it is, sent as ``content_type``."""
        if self._token is None:
            self.login()
        headers = {"If-Match": if_match} if if_match else {}
        if content_type:
            headers["Content-Type"] = content_type
        unsafe = method not in IDEMPOTENT and not (method in ("PUT", "PATCH") and if_match)
        try:
            return self._send(method, path, json_body=json_body, data=data, params=params, headers=headers, retry_unsent_only=unsafe)
        except Unauthorized:
            # The token expired or was revoked: log in again, repeat once.
            # A repeat is safe: a 401 means the first call did nothing.
            log.info("cairn: token rejected, logging in again as %s", self.username)
            self.login()
            return self._send(method, path, json_body=json_body, data=data, params=params, headers=headers, retry_unsent_only=unsafe)

    def stream_sse(self, path: str, *, params: Mapping[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Yield the JSON ``data`` of each server-sent event of a stream on the current gateway.

        Lines are bounded (MAX_SSE_LINE); a stream that ends or breaks raises Unavailable so
        the caller reconnects (with the id it saw last)."""
        if self._token is None:
            self.login()
        base = self.gateways[self._current]
        try:
            r = self._session.get(
                base + API_PREFIX + path,
                params={k: v for k, v in (params or {}).items() if v is not None},
                headers={"Authorization": "Bearer " + (self._token or ""), "Accept": "text/event-stream"},
                stream=True,
                timeout=(self.timeout[0], 60.0),  # the server sends a keepalive every 15 s
            )
        except requests.RequestException as e:
            self._current = (self._current + 1) % len(self.gateways)
            raise Unavailable(0, "unavailable", f"{base}: event stream: {e}") from e
        with r:
            if r.status_code == 401:
                self.login()
                raise Unavailable(401, "unavailable", "token expired: logged in again; reconnect")
            if r.status_code >= 400:
                raise error_from_response(r.status_code, r.raw.read(65536, decode_content=True) or b"", r.headers)
            try:
                yield from parse_sse(r.iter_content(8192))
            except requests.RequestException as e:
                raise Unavailable(0, "unavailable", f"{base}: event stream broke: {e}") from e
        raise Unavailable(0, "unavailable", f"{base}: event stream ended")

    def _send(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        data: bytes | None = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        auth: bool = True,
        retry_unsent_only: bool,
    ) -> Response:
        failures: list[str] = []
        sent_maybe = False  # an earlier attempt may have reached a gateway
        n = len(self.gateways)
        attempts = max(self.retries, n)
        for attempt in range(attempts):
            idx = (self._current + attempt) % n
            base = self.gateways[idx]
            hdrs = dict(headers or {})
            if auth and self._token:
                hdrs["Authorization"] = "Bearer " + self._token
            try:
                resp = self._session.request(
                    method,
                    base + API_PREFIX + path,
                    json=json_body,
                    data=data,
                    params={k: v for k, v in (params or {}).items() if v is not None},
                    headers=hdrs,
                    timeout=self.timeout,
                )
            except requests.exceptions.SSLError as e:
                # A certificate problem is not fixed by retrying.
                raise Unavailable(
                    0, "tls_error", f"{base}: TLS verification failed ({e}); pass ca_file= with the gateway's cert.pem or its CA"
                ) from e
            except requests.RequestException as e:
                failures.append(f"{base}: {type(e).__name__}: {e}")
                if retry_unsent_only and not _never_sent(e):
                    raise Unavailable(
                        0,
                        "unavailable",
                        f"{method} {path} to {base} failed after sending ({e}); it may or may not have been applied: check, then retry",
                    ) from e
                sent_maybe = sent_maybe or not _never_sent(e)
                log.warning("cairn: %s %s on %s failed (%s); trying the next gateway", method, path, base, type(e).__name__)
                self._pause(attempt, n)
                continue
            if resp.status_code in RETRY_STATUSES and not retry_unsent_only:
                failures.append(f"{base}: HTTP {resp.status_code}: {resp.text[:200].strip()}")
                log.warning("cairn: %s %s on %s answered %d; trying the next gateway", method, path, base, resp.status_code)
                self._pause(attempt, n)
                continue
            self._current = idx
            if resp.status_code == 404 and method == "DELETE" and sent_maybe:
                # The earlier attempt deleted it; its answer was lost.
                return Response(204, resp.headers, None, base)
            if resp.status_code >= 400:
                raise error_from_response(resp.status_code, resp.content, resp.headers)
            body: Any = None
            if resp.content:
                try:
                    body = resp.json()
                except ValueError as e:
                    raise ApiError(resp.status_code, "invalid_response", f"{base}{path}: the answer is not JSON: {resp.text[:200]}") from e
            return Response(resp.status_code, resp.headers, body, base)
        raise Unavailable(
            0,
            "unavailable",
            "no gateway answered "
            + f"{method} {path} after {attempts} attempts: "
            + "; ".join(failures[-len(self.gateways) :])
            + ". Check that the gateways run (cairn gateway) and are reachable, then retry",
        )

    def _pause(self, attempt: int, n: int) -> None:
        # Go round all gateways at once; back off between rounds.
        if (attempt + 1) % n == 0:
            self._sleep(min(self.backoff * (2 ** ((attempt + 1) // n - 1)), 5.0))

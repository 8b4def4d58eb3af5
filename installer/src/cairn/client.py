"""The Cairn gateway client: one object, one HTTP session, every resource."""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType

from ._http import Transport
from .resources import (
    Alerts,
    Devices,
    Events,
    FaultSets,
    Hosts,
    Jobs,
    JoinTokens,
    MdmMembers,
    Pools,
    ProtectionDomains,
    SDSs,
    StatisticsApi,
    SystemApi,
    Upgrades,
    Users,
    Volumes,
)


class Client:
    """A client of Cairn's REST API (``/api/v1``) over one or more gateways.

    Args:
        gateways: gateway addresses, ``"host:port"`` or ``"https://host:port"``;
            calls go to the one that answered last and fail over to the next
            on connection errors and 502/503/504.
        username, password: an API user (``cairnctl user create``); the client
            logs in on the first call and again whenever the token expires.
        ca_file: PEM file of the gateway's certificate or its CA (the gateway
            writes its self-signed ``cert.pem`` into its state directory).
        verify: False skips TLS verification (never in production).
        timeout: read timeout of every call, seconds (connect: 5 s).
        retries: attempts of a safe call across gateways, with backoff.
        token: an existing bearer token (then username/password are only
            used to log in again when it expires).

    Example::

        import cairn
        from cairn.models import GiB

        with cairn.Client(["10.0.0.11:8443", "10.0.0.12:8443"], "admin", password,
                          ca_file="/etc/cairn/gateway-ca.pem") as c:
            v = c.volumes.create("db1", pool="pool1", size=16 * GiB)
            c.volumes.map(v, host="esx1")
            for p in c.pools.list():
                print(p.name, p.capacity.free if p.capacity else "?")
    """

    def __init__(
        self,
        gateways: Sequence[str] | str,
        username: str | None = None,
        password: str | None = None,
        *,
        ca_file: str | None = None,
        verify: bool = True,
        timeout: float = 30.0,
        retries: int = 4,
        token: str | None = None,
    ) -> None:
        if isinstance(gateways, str):
            gateways = [g for g in gateways.split(",") if g.strip()]
        tls_verify: bool | str = ca_file if (ca_file and verify) else verify
        self._transport = Transport(gateways, username, password, verify=tls_verify, timeout=timeout, retries=retries, token=token)
        t = self._transport
        self.jobs = Jobs(t)
        self.protection_domains = ProtectionDomains(t)
        self.fault_sets = FaultSets(t)
        self.sds = SDSs(t)
        self.devices = Devices(t)
        self.pools = Pools(t)
        self.volumes = Volumes(t)
        self.hosts = Hosts(t)
        self.users = Users(t)
        self.mdm = MdmMembers(t)
        self.events = Events(t)
        self.alerts = Alerts(t)
        self.statistics = StatisticsApi(t)
        self.system = SystemApi(t)
        self.join_tokens = JoinTokens(t)
        self.upgrades = Upgrades(t)

    @property
    def transport(self) -> Transport:
        """The HTTP layer (current gateway, token); for diagnostics."""
        return self._transport

    def login(self) -> None:
        """Log in now (otherwise the first call does); raises Unauthorized on wrong credentials."""
        self._transport.login()

    def close(self) -> None:
        """Close the HTTP session (does not log out: the token expires on its own)."""
        self._transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

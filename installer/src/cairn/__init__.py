"""Python client of Cairn's gateway API (``/api/v1``).

>>> import cairn
>>> cairn.NotFound.code_name
'not_found'

See docs/python-client.md for a tour.
"""

from .client import Client
from .errors import (
    AlreadyExists,
    ApiError,
    CairnError,
    Conflict,
    Forbidden,
    Internal,
    InUse,
    Invalid,
    JobFailed,
    JobTimeout,
    NoChange,
    NotFound,
    Throttled,
    Unauthorized,
    Unavailable,
)
from .models import GiB, KiB, MiB, TiB

__version__ = "0.1.0"

__all__ = [
    "AlreadyExists",
    "ApiError",
    "CairnError",
    "Client",
    "Conflict",
    "Forbidden",
    "GiB",
    "InUse",
    "Internal",
    "Invalid",
    "JobFailed",
    "JobTimeout",
    "KiB",
    "MiB",
    "NoChange",
    "NotFound",
    "TiB",
    "Throttled",
    "Unauthorized",
    "Unavailable",
]

"""The installer's error type and its exit codes (stable: scripts branch on them)."""

from __future__ import annotations

import enum


class Exit(enum.IntEnum):
    """Exit codes of cairn-install."""

    OK = 0
    FAILED = 1  # the action failed (message says why)
    USAGE = 2  # bad flags or input files; nothing was changed
    AUTH = 3  # wrong vCenter credentials
    UNREACHABLE = 4  # vCenter (or the plugin server) cannot be reached
    TLS = 5  # certificate not trusted or not the pinned one
    EXISTS = 6  # the plugin is already registered (use upgrade)
    NOT_REGISTERED = 7  # upgrade of a plugin that is not registered
    OVA_INVALID = 8  # the OVA fails cairn-ova check
    NO_SPACE = 9  # a datastore has not enough free space
    INTERRUPTED = 130  # Ctrl-C; half-done work was cleaned up


class InstallerError(Exception):
    """A failure to report to the user: ``message`` says what to do next."""

    def __init__(self, code: Exit, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(message)

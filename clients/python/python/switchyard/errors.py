"""What the extension raises: one class per thing the caller can do about a failure.

The classes subclass the built-in exception a Python caller already catches for the same
situation (``ValueError`` for bad input, ``ConnectionError`` for an unreachable backend), so code
written against the seeds keeps working. Every message says what to do next.
"""

from __future__ import annotations


class SwitchyardError(Exception):
    """Every error switchyard's extension raises."""


class InvalidInputError(SwitchyardError, ValueError):
    """The caller passed a value the contract forbids: fix the input; retrying will not help.

    ``field`` is the dotted path of the offending value (``payload.usage.usd``).
    """

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class ConfigError(SwitchyardError, ValueError):
    """A URL or option is unusable; ``key`` names it."""

    def __init__(self, message: str, key: str = "") -> None:
        super().__init__(message)
        self.key = key


class UnavailableError(SwitchyardError, ConnectionError):
    """The backend could not be reached or failed during the call. The call's outcome is unknown
    (it may have been applied); retrying later may succeed."""


class ContendedError(SwitchyardError):
    """An optimistic write lost to concurrent writers too many times; nothing was written."""


class CorruptError(SwitchyardError):
    """Data read back is not what switchyard writes; other keys stay readable."""


class RejectedError(SwitchyardError):
    """The backend refused the call because of its own state; the same call will fail again."""


class AlreadyExistsError(SwitchyardError):
    """The id the caller chose is taken; nothing was written; choose a new id."""


class TaskCancelledError(SwitchyardError):
    """The task was cancelled while this caller held it: stop working on it; do not retry it."""


class ClosedError(SwitchyardError, RuntimeError):
    """The store or backend was closed; open a new one."""


__all__ = [
    "AlreadyExistsError",
    "ClosedError",
    "ConfigError",
    "ContendedError",
    "CorruptError",
    "InvalidInputError",
    "RejectedError",
    "SwitchyardError",
    "TaskCancelledError",
    "UnavailableError",
]

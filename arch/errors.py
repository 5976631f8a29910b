"""The errors a user can cause, typed so a command line reports them without parsing text.

Every error a user can trigger with bad input (a malformed program, a bad
configuration, a data file that is not what it claims, a network that does not fit,
a missing tool) is a :class:`CaterpillarError`. Its message names what is wrong and
where (the option, the file and line); ``caterpillar`` prints it as one line and exits
with :attr:`CaterpillarError.exit_code`. Anything else that escapes is a bug.

The library's own error classes (``ConfigError``, ``AsmError``, ``MLPError`` and the
rest) derive from one of these; those that were ``ValueError`` before still are.
"""

from __future__ import annotations

__all__ = ["CaterpillarError", "UsageError", "InputError", "ToolError"]


class CaterpillarError(Exception):
    """A user-caused error whose message says what is wrong and where.

    Attributes
    ----------
    exit_code : int
        The command line's exit status for it: 2 for a usage error (bad options),
        1 for a runtime error (bad input found while working, a missing tool).
    """

    exit_code = 1


class UsageError(CaterpillarError, ValueError):
    """Bad command-line options: out of range, conflicting, or not applicable."""

    exit_code = 2


class InputError(CaterpillarError, ValueError):
    """A file or value given as input is malformed or does not fit (names the file)."""


class ToolError(CaterpillarError, RuntimeError):
    """An external tool is missing or failed (Yosys, nextpnr, a simulator)."""

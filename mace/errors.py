"""Errors meant for people: each names the file, key, op or tensor at fault.

The CLI prints `str(err)` and exits non-zero without a traceback (unless
--verbose); library callers can catch the subclasses.
"""


class MaceError(Exception):
    """Base class of every error the toolchain reports to a user."""

    exit_code = 1


class ConfigError(MaceError):
    """A deployment or device .yml is malformed; the message names file and key path."""


class ChecksumError(MaceError):
    """A downloaded or local file does not match its sha256 in the .yml."""


class ModelError(MaceError):
    """A source model cannot be read or does not match the deployment file."""


class UnsupportedOpError(ModelError):
    """Conversion met an op type no frontend mapping or kernel covers."""


class RuntimeInputError(MaceError):
    """Inputs given to `run` do not match the model (name, shape, dtype)."""


class ValidationFailed(MaceError):
    """`run --validate` found an output below its similarity threshold."""

"""How a command reports what stops it: a TRACE error on stdout and one line on stderr, secrets masked, and an exit code."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from airbyte_cdk.utils.traced_exception import AirbyteTracedException

from source_framework.destinations.spark.table_lock import TableLocked
from source_framework.runtime.inputs import InputError
from source_framework.runtime.output import ProtocolOutput
from source_framework.runtime.process import EXIT_BAD_INPUT, EXIT_FAILED


class SourceFailed(Exception):
    """The source's own code raised outside any stream's read: the command cannot go on."""

    def __init__(self, call: str, error: BaseException) -> None:
        detail = error.message if isinstance(error, AirbyteTracedException) and error.message else str(error)
        super().__init__(f"{call} raised {type(error).__name__}: {detail}")
        self.error = error
        failure_type = getattr(error, "failure_type", None) if isinstance(error, AirbyteTracedException) else None
        #: as airbyte-cdk's entrypoint reports it: a traced exception's own type, else system_error
        self.failure_type = getattr(failure_type, "value", None) or "system_error"


@contextmanager
def source_call(call: str) -> Iterator[None]:
    """What the source's code raises in the block becomes ``SourceFailed`` naming ``call``."""
    try:
        yield
    except (InputError, SourceFailed):
        raise
    except Exception as error:
        raise SourceFailed(f"the source's {call}", error) from error


def report_cannot_start(error: Exception, output: ProtocolOutput) -> int:
    """A table is locked, a stream's name cannot be a table, or the warehouse cannot hold tables: nothing was read."""
    message = output.secrets.mask(str(error))
    locked = isinstance(error, TableLocked)
    output.error(message, error, failure_type="transient_error" if locked else "config_error")
    output.flush()
    sys.stderr.write(f"error: {message}\n")
    return EXIT_FAILED if locked else EXIT_BAD_INPUT


def report_source_failed(failure: SourceFailed, output: ProtocolOutput) -> int:
    """A TRACE error with the failure type airbyte-cdk would give and one line on stderr, secrets masked; non-zero exit."""
    message = output.secrets.mask(" ".join(str(failure).split()))
    output.error(message, failure.error, failure_type=failure.failure_type)
    output.flush()
    sys.stderr.write(f"error: {message}\n")
    return EXIT_BAD_INPUT if failure.failure_type == "config_error" else EXIT_FAILED


def report_bad_input(error: InputError, output: ProtocolOutput) -> int:
    message = output.secrets.mask(str(error))
    output.error(message, error, failure_type="config_error")
    output.flush()
    sys.stderr.write(f"error: {message}\n")
    return EXIT_BAD_INPUT

"""Where ``read`` sends the LOG, TRACE and CONTROL messages that are neither records nor checkpoints."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from source_framework.runtime.output import ProtocolOutput
from source_framework.runtime.stream_items import CONTROL, LOG, RECORD, STATE, TRACE, StreamItem, classify

logger = logging.getLogger("source_framework.read")


def pass_on(output: ProtocolOutput, item: StreamItem) -> None:
    if item.kind == LOG:
        output.log(item.level, item.text)
    elif item.kind in (TRACE, CONTROL) and item.message is not None:
        output.message(item.message)


def drain_side_messages(side_messages: Callable[[], Iterable[Any]], stream: str, output: ProtocolOutput) -> None:
    """Messages the source's components emitted on the side, taken while ``stream`` is read.

    A concurrent cursor's STATE is no checkpoint (the adapter reads the cursor itself). A TRACE ERROR is printed and
    fails no stream: the stream draining it may not be its own, and an unrecovered failure raises in its stream anyway.
    """
    for message in side_messages():
        classified = classify(message, stream, errors_stop=False)
        if classified.kind == STATE:
            logger.debug("stream %s: a component emitted the state of %s; the cursor's own state is used", stream, classified.stream)
        elif classified.kind == RECORD:
            raise ValueError(
                f"stream '{stream}': a component emitted a RECORD message for '{classified.stream}' outside the "
                f"records the stream yields; it cannot be placed in any table's checkpoints"
            )
        else:
            pass_on(output, classified)


def print_leftovers(side_messages: Callable[[], Iterable[Any]], output: ProtocolOutput) -> None:
    """What components emitted after the last drain, printed so it is neither lost nor taken by the next stream's drain."""
    for message in side_messages():
        try:
            item = classify(message, "", errors_stop=False)
        except Exception as error:  # UnknownStreamItem: no stream is left to stop for it
            logger.error("a component emitted a message no stream took: %s", error)
            continue
        if item.kind == RECORD:
            logger.error("a component emitted a RECORD message for '%s' after its stream ended; it was not written", item.stream)
        elif item.kind != STATE:  # a concurrent cursor's: its stream's own state was taken from the cursor
            pass_on(output, item)

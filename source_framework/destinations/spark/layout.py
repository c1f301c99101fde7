"""Where a stream's table lives: ``<warehouse>/<namespace>/<stream>``, decided here and nowhere else.

Names from connectors can hold anything (``/``, ``..``, a leading dot), so each becomes one folder name by a reversible
encoding: letters, digits, ``_``, ``-`` and a non-leading ``.`` stay, anything else is ``~`` and its UTF-8 bytes in hex
(not ``%`` or ``=``, which Hadoop and Spark read as an escape and a partition). A path resolving outside the warehouse is refused."""

from __future__ import annotations

import os
import re

SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
ESCAPE = "~"
#: A file system's 255 bytes a name, less what the files beside a table's folder add to its name
MAX_NAME_BYTES = 255 - len(".") - len(".deleted-") - 32
_ESCAPED = re.compile(r"~([0-9A-F]{2})")


_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
OBJECT_STORES = ("s3", "s3a")


def warehouse_folder(warehouse: str) -> str:
    """The real local folder a path or ``file://`` URI names, or an object store's URI; any other URI is refused."""
    match = _URI.match(warehouse)
    if match is None:
        return os.path.realpath(warehouse)
    scheme = match.group(1).lower()
    if scheme == "file":
        return os.path.realpath(warehouse[len(match.group(0)):] or "/")
    rest = warehouse[len(match.group(0)):].strip("/")
    if scheme in OBJECT_STORES and rest:
        return f"{scheme}://{rest}"
    if scheme in OBJECT_STORES:
        raise ValueError(f"the warehouse {warehouse!r} names no bucket: give s3://bucket or s3://bucket/prefix; nothing was written")
    raise ValueError(
        f"the warehouse {warehouse!r} is a {scheme}:// URI, which these tables cannot reach: a warehouse is a local or "
        f"mounted folder (a path or a file:// URI) or, for Delta tables, an S3 bucket (s3://bucket/prefix; S3-compatible "
        f"stores through AWS_ENDPOINT_URL). Other object stores need Spark's connector for them, which is not installed "
        f"(a bucket mounted with a FUSE file system works as a folder); nothing was written"
    )


def warehouse_for(warehouse: str, table_format: str) -> str:
    location = warehouse_folder(warehouse)
    if is_object_store(location) and table_format != "delta":
        raise ValueError(
            f"the warehouse {warehouse!r} is on an object store, which {table_format} tables cannot reach: they are "
            f"written to a local or mounted folder only. Delta tables (table_format: delta) can be; nothing was written"
        )
    return location


def is_object_store(warehouse: str) -> bool:
    match = _URI.match(warehouse)
    return match is not None and match.group(1).lower() in OBJECT_STORES


class UnsafeTableName(ValueError):
    """A stream or namespace name that cannot be a table folder inside the warehouse."""


def encode_name(name: str) -> str:
    """One folder name for ``name``; reversible with ``decode_name``."""
    if not isinstance(name, str) or not name:
        raise UnsafeTableName(f"a stream or namespace name must be a non-empty string, got {name!r}")
    parts = []
    for index, char in enumerate(name):
        if char in SAFE or (char == "." and index > 0):
            parts.append(char)
        else:
            try:
                raw = char.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: valid JSON, but no character a path can hold
                raise UnsafeTableName(f"the name {name[:60]!r} is not valid Unicode text (a lone surrogate)") from None
            parts.append("".join(f"{ESCAPE}{byte:02X}" for byte in raw))
    encoded = "".join(parts)
    if len(encoded.encode("utf-8")) > MAX_NAME_BYTES:
        raise UnsafeTableName(f"the name {name[:60]!r}... is too long for a folder ({len(encoded)} characters encoded)")
    return encoded


def decode_name(folder: str) -> str:
    raw = bytearray()
    position = 0
    for match in _ESCAPED.finditer(folder):
        raw += folder[position : match.start()].encode("utf-8")
        raw.append(int(match.group(1), 16))
        position = match.end()
    raw += folder[position:].encode("utf-8")
    return raw.decode("utf-8")


def table_path(warehouse: str, namespace: str, stream: str) -> str:
    """The real path of a stream's table folder (its URI on an object store); ``UnsafeTableName`` if outside ``warehouse``."""
    if is_object_store(warehouse):  # (no links on a store: an encoded name is one key segment)
        return f"{warehouse}/{encode_name(namespace)}/{encode_name(stream)}"
    root = os.path.realpath(warehouse)
    path = os.path.realpath(os.path.join(root, encode_name(namespace), encode_name(stream)))
    if os.path.commonpath([root, path]) != root or path == root:
        raise UnsafeTableName(
            f"the table of stream {stream!r} (namespace {namespace!r}) would be {path}, outside the warehouse {root} "
            f"(a folder in the warehouse links elsewhere); refusing to write there"
        )
    return path

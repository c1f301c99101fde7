"""Spark frames of a table's rows, as both table formats build them; pyspark is imported only when one is built."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def arrow_frame(spark: SparkSession, data: pa.Table) -> DataFrame:
    """A DataFrame of ``data``, its schema given explicitly: Spark Connect refuses to infer one from an empty table."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return spark.createDataFrame(data, schema=from_arrow_schema(data.schema))


def spark_path(path: str) -> str:
    """``path`` on the local file system, whatever the cluster's default; not percent-encoded, as Hadoop's Path takes it literally."""
    return "file://" + path


def column(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def path_value(path: list[str]) -> Any:
    """A key or cursor path's value: the column ``path[0]``, or the value inside its JSON text; null where the path leads nowhere."""
    from pyspark.sql import functions as F

    value = column(path[0])
    for name in path[1:]:
        # As DDL: pyspark 4.2's from_json takes a MapType but its type hints do not say so.
        value = F.from_json(value.cast("string"), "map<string,string>").getItem(name)
    return value


def cursor_value(path: list[str], json_schema: Mapping[str, Any]) -> Any:
    """A cursor's value to order rows by; inside an object column, read as the type its schema declares (as text 9 > 10)."""
    from pyspark.sql import functions as F

    value = path_value(path)
    if len(path) == 1:
        return value
    spec: Any = json_schema
    for name in path:
        spec = ((spec or {}).get("properties") or {}).get(name) if isinstance(spec, Mapping) else None
    if not isinstance(spec, Mapping):
        return value
    declared = spec.get("type")
    kinds = {declared} if isinstance(declared, str) else set(declared or ())
    kinds.discard("null")
    if kinds == {"integer"}:
        return value.try_cast("decimal(38,0)")
    if kinds <= {"integer", "number"} and kinds:
        return value.try_cast("double")
    if kinds == {"string"} and spec.get("format") == "date-time":
        return F.try_to_timestamp(value)
    return value


def conformed(frame: Any, schema: pa.Schema) -> Any:
    """``frame`` with exactly ``schema``'s columns, in order: missing ones null, others cast (timestamps as ISO 8601 UTC text)."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StringType, TimestampType

    present = {field.name: field.dataType for field in frame.schema.fields}
    columns = []
    for field in from_arrow_schema(schema).fields:
        old = present.get(field.name)
        if old is None:
            value = F.lit(None).cast(field.dataType)
        elif old == field.dataType:
            value = column(field.name)
        elif isinstance(old, TimestampType) and isinstance(field.dataType, StringType):
            utc = F.to_utc_timestamp(column(field.name), F.current_timezone())
            value = F.date_format(utc, "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'")
        else:
            value = column(field.name).cast(field.dataType)
        columns.append(value.alias(field.name))
    return frame.select(*columns)

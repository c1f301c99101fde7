"""Create the SparkSession the destination writes with, configured once and quietly.

The JVM gets our stderr as its stdout, since the CLI's stdout is reserved for protocol messages; under Spark Connect
(``sc://``) no JVM starts and only ``spark.sql.*`` settings apply."""

from __future__ import annotations

import glob
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from source_framework.destinations.spark.jvm_cache import java_options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_STDERR_FD = 2

DEFAULT_CONF: dict[str, str] = {
    "spark.driver.memory": "1g",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",  # progress bars are noise in the logs
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # The driver JVM competes with the reader for CPU at start: stopping its JIT at C1 halves that start-up work.
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
}

LOG_LEVEL = "WARN"
#: how long a Spark Connect call retries a server that does not answer (destination ``connect_retry_seconds``)
CONNECT_RETRY_SECONDS = 120.0
CONNECT_MODE_VARIABLE = "SPARK_CONNECT_MODE_ENABLED"  # pyspark's process-wide "sessions are Spark Connect"


def get_spark(
    master: str = "local[*]",
    app_name: str = "source_framework",
    conf: dict | None = None,
    connect_retry_seconds: float = CONNECT_RETRY_SECONDS,
) -> SparkSession:
    """Return a configured SparkSession (the running one, if any); pyspark is imported here, as many syncs never start it."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    settings = {**DEFAULT_CONF, **{key: _conf_value(value) for key, value in (conf or {}).items()}}
    if master.startswith("sc://"):
        return _connect_session(master, app_name, settings, connect_retry_seconds)
    if "spark.driver.extraJavaOptions" not in (conf or {}):
        # Spark's classes from the environment's class-data archive, if built (``jvm_cache``).
        options = f"{settings['spark.driver.extraJavaOptions']} {java_options()}".strip()
        settings["spark.driver.extraJavaOptions"] = options

    settings.update(delta_settings(settings))
    if master.startswith("local"):
        # Delta replays a table's log into this many partitions on each first read of a version; its default (50) is for clusters.
        settings.setdefault(DELTA_SNAPSHOT_PARTITIONS, settings["spark.sql.shuffle.partitions"])
    spark_conf = SparkConf().setMaster(master).setAppName(app_name).setAll(list(settings.items()))
    # pyspark keeps one JVM gateway per process, even after ``stop()``: launching another would leak a JVM.
    if SparkContext._gateway is None:
        with _lower_priority_for_children():
            gateway = launch_gateway(spark_conf, popen_kwargs={"stdout": _STDERR_FD})
        SparkContext(conf=spark_conf, gateway=gateway)
    spark = SparkSession.builder.config(conf=spark_conf).getOrCreate()
    spark.sparkContext.setLogLevel(LOG_LEVEL)
    # A session that was running already took none of the Hadoop settings above: they apply to file systems opened from now on.
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in settings.items():
        if key.startswith("spark.hadoop."):
            hadoop.set(key[len("spark.hadoop."):], value)
    # Nor the AWS variables: S3A gets the keys here, in its Hadoop configuration only (never in Spark's settings, which UIs show).
    for variable, key in (("AWS_ACCESS_KEY_ID", "fs.s3a.access.key"), ("AWS_SECRET_ACCESS_KEY", "fs.s3a.secret.key"),
                          ("AWS_SESSION_TOKEN", "fs.s3a.session.token")):
        if os.environ.get(variable) and f"spark.hadoop.{key}" not in settings:
            hadoop.set(key, os.environ[variable])
    return spark


#: where ``scripts/venv.sh`` puts the Delta Lake and hadoop-aws jars; this environment variable may name another folder
JARS_VARIABLE = "SOURCE_FRAMEWORK_SPARK_JARS"
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
DELTA_SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"


def installed_jars() -> list[str]:
    folder = os.environ.get(JARS_VARIABLE) or os.path.join(sys.prefix, "share", "source_framework", "spark-jars")
    return sorted(glob.glob(os.path.join(folder, "*.jar")))


def delta_settings(settings: dict[str, str]) -> dict[str, str]:
    """What an embedded session needs for Delta tables and s3://, added to the user's own settings (jars never fetched)."""
    jars = installed_jars()
    if not jars:
        return {}
    added = {"spark.jars": ",".join([*jars, *filter(None, [settings.get("spark.jars")])])}
    extensions = [e for e in (settings.get("spark.sql.extensions") or "").split(",") if e]
    added["spark.sql.extensions"] = ",".join(dict.fromkeys([DELTA_EXTENSION, *extensions]))
    added["spark.sql.catalog.spark_catalog"] = settings.get("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
    added["spark.hadoop.fs.s3.impl"] = settings.get("spark.hadoop.fs.s3.impl", "org.apache.hadoop.fs.s3a.S3AFileSystem")
    return {**added, **{key: value for key, value in s3_settings().items() if key not in settings}}


def s3_settings() -> dict[str, str]:
    """S3A's endpoint and region from the standard AWS variables delta-rs reads too, so both writers reach the same store."""
    settings = {}
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        settings["spark.hadoop.fs.s3a.endpoint"] = endpoint
        settings["spark.hadoop.fs.s3a.path.style.access"] = "true"
        settings["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(endpoint.startswith("https://")).lower()
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        settings["spark.hadoop.fs.s3a.endpoint.region"] = region
    return settings


#: The niceness the embedded JVM runs at (0-19; higher yields the CPU more readily).
JVM_NICENESS = 10


@contextmanager
def _lower_priority_for_children() -> Iterator[None]:
    """Start the JVM niced (a child inherits its thread's niceness), as it competes with the thread reading the API."""
    thread = threading.get_native_id()
    try:
        before = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, max(before, JVM_NICENESS))
    except (AttributeError, OSError):
        yield
        return
    try:
        yield
    finally:
        try:
            os.setpriority(os.PRIO_PROCESS, thread, before)
        except OSError:  # an unprivileged thread cannot raise its priority back: it only starts Spark
            pass


def bounded_retry_policy(seconds: float) -> Any:
    """pyspark's retry policy, with as many doublings from 0.2 s as fit in ``seconds`` (pyspark's default waits ~10 minutes)."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    retries, waited, backoff = 0, 0.0, 0.2
    while waited < seconds:
        waited += backoff
        retries += 1
        backoff = min(backoff * 2, 15.0)
    return DefaultPolicy(max_retries=retries, backoff_multiplier=2.0, initial_backoff=200, max_backoff=15_000,
                         max_server_retry_delay=int(seconds * 1000))


def _conf_value(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _connect_session(url: str, app_name: str, settings: dict[str, str], retry_seconds: float) -> SparkSession:
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    # The client exists before the builder's first call to the server, so that call retries as briefly as every later one.
    client_session = ConnectSession(connection=url)
    client_session.client.set_retry_policies([bounded_retry_policy(retry_seconds)])
    ConnectSession._set_default_and_active_session(client_session)  # what the builder then returns
    builder = SparkSession.builder.remote(url).appName(app_name)
    for key, value in settings.items():
        if key.startswith("spark.sql."):
            builder = builder.config(key, value)
    connect_mode = os.environ.get(CONNECT_MODE_VARIABLE)
    try:
        return builder.getOrCreate()
    except BaseException:
        # pyspark set it before trying: left behind, every later session here would be taken for a Connect one.
        if connect_mode is None:
            os.environ.pop(CONNECT_MODE_VARIABLE, None)
        else:
            os.environ[CONNECT_MODE_VARIABLE] = connect_mode
        raise

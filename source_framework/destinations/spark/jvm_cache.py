"""A class-data archive of Spark's JVM, built once per environment (``scripts/venv.sh``), so the embedded session starts in half
the time; named after the Java executable, pyspark's version and what it records: a change to any of them finds no archive."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java and os.path.exists(java) else None


def archive_path() -> str | None:
    java = _java()
    if java is None:
        return None
    import pyspark

    stat = os.stat(java)
    recorded = f"{java}:{stat.st_size}:{stat.st_mtime_ns}:{pyspark.__version__}:{_RECORDING}"
    key = hashlib.sha1(recorded.encode()).hexdigest()[:12]
    return os.path.join(sys.prefix, "share", "source_framework", f"spark-{key}.jsa")


def java_options() -> str:
    path = archive_path()
    return f"-XX:SharedArchiveFile={path}" if path and os.path.isfile(path) else ""


# A session's start, a Parquet folder and (with Delta's jars) a Delta table written and read: a Delta read's start is mostly class loading.
_RECORDING = """
import sys, pyarrow as pa
from source_framework.destinations.spark.session import get_spark, installed_jars
spark = get_spark('local[1]', conf={'spark.driver.extraJavaOptions': '-XX:TieredStopAtLevel=1 -XX:ArchiveClassesAtExit=ARCHIVE'})
folder = 'file://' + sys.argv[1]
spark.createDataFrame(pa.table({'a': [1, 2]})).coalesce(1).write.mode('overwrite').parquet(folder + '/parquet')
spark.read.parquet(folder + '/parquet').count()
if installed_jars():
    for rows in ([1, 2], [3]):
        spark.createDataFrame(pa.table({'a': rows})).write.format('delta').mode('append').save(folder + '/delta')
    spark.read.format('delta').load(folder + '/delta').collect()
proc = spark.sparkContext._gateway.proc
spark.stop()
proc.stdin.close()  # the JVM exits when its stdin closes, and writes the archive as it does
proc.wait()
"""


def build() -> str | None:
    """Record an embedded session's classes into the archive; returns its path (renamed into place, never mapped half written)."""
    path = archive_path()
    if path is None or os.path.isfile(path):
        return path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = f"{path}.{os.getpid()}.partial"
    script = _RECORDING.replace("ARCHIVE", partial)
    with tempfile.TemporaryDirectory(prefix="sf-jvm-cache-") as folder:
        subprocess.run([sys.executable, "-c", script, folder], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    if not os.path.isfile(partial):
        return None
    os.replace(partial, path)
    return path


if __name__ == "__main__":
    built = build()
    sys.stderr.write(f"Spark class-data archive: {built or 'not built (no Java found)'}\n")

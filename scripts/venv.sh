# Sourced by the other scripts: create or refresh ./.venv from setup.py.
# Needs Python 3.11+, Java 17 and Maven on the machine; everything else comes from PyPI and Maven Central.
set -euo pipefail
VENV="${VENV:-.venv}"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "creating $VENV with $PYTHON" >&2
  "$PYTHON" -m venv "$VENV"
fi
# The package is installed in editable mode, so only a changed setup.py needs pip again.
STAMP="$VENV/.installed-from"
WANTED="$(sha256sum setup.py | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANTED" ]; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[tests]' >&2
  echo "$WANTED" > "$STAMP"
fi
# The jars Spark needs for Delta tables and s3:// (jars/pom.xml), from Maven Central into the
# environment, again only when the pom changed; the Spark session lists them (session.py).
JARS="$VENV/share/source_framework/spark-jars"
JARS_WANTED="$(sha256sum jars/pom.xml | cut -d' ' -f1)"
if [ "$(cat "$JARS/.installed-from" 2>/dev/null)" != "$JARS_WANTED" ]; then
  echo "installing Spark's Delta and S3 jars into $JARS (Maven)" >&2
  rm -rf "$JARS" && mkdir -p "$JARS"
  # (an absolute folder: Maven resolves a relative one from the pom's folder)
  mvn -B -q -f jars/pom.xml dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$(cd "$JARS" && pwd)" >&2
  echo "$JARS_WANTED" > "$JARS/.installed-from"
fi
# Once per environment: the class-data archive that halves the embedded Spark JVM's start-up
# (source_framework/destinations/spark/jvm_cache.py). Without Java it says so and goes on.
"$VENV/bin/python" -m source_framework.destinations.spark.jvm_cache >&2 || true
export PATH="$PWD/$VENV/bin:$PATH"

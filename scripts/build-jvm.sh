#!/usr/bin/env bash
# Build the JVM segment reader (spark_connector/jvm) into a jar, compiled with `javac --release 17`
# against the jars that ship inside the installed pyspark: nothing is downloaded.
# Usage: scripts/build-jvm.sh <python> <jar to write>
set -euo pipefail
PY="$1"
JAR="$2"
SRC=spark_connector/jvm/src/main
command -v javac >/dev/null 2>&1 || { echo "javac is not on PATH: run \`make system-deps\` (installs a JDK)" >&2; exit 1; }
SPARK_JARS="$("$PY" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
[ -d "$SPARK_JARS" ] || { echo "pyspark's jars are not at $SPARK_JARS" >&2; exit 1; }
OUT="$(dirname "$JAR")/classes"
rm -rf "$OUT"
mkdir -p "$OUT"
find "$SRC/java" -name '*.java' > "$OUT.sources"
javac --release 17 -Xlint:all,-serial,-processing,-path -Werror -encoding UTF-8 -cp "$SPARK_JARS/*" -d "$OUT" @"$OUT.sources"
rm -f "$OUT.sources"
cp -r "$SRC/resources/." "$OUT/"
rm -f "$JAR"
jar --create --file "$JAR" -C "$OUT" .
echo "built $JAR"

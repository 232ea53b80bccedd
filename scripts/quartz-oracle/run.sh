#!/usr/bin/env bash
# Quartz 2.3.2 oracle: scripts/quartz-oracle/run.sh < cases.jsonl > out.jsonl
# Compiles QuartzOracle.java into a temporary directory and runs it on stdin.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
J="${QUARTZ_JAVA_DIR:-/usr/share/java}"   # where Debian puts the jars
quartz=""
for f in "$J/quartz2.jar" "$J"/quartz2-*.jar "$J/quartz.jar"; do
  if [ -f "$f" ]; then quartz="$f"; break; fi
done
if [ -z "$quartz" ]; then
  echo "run.sh: Quartz 2 is not installed (no $J/quartz2.jar)." >&2
  echo "  Install it from Debian's packages:  apt-get update && apt-get install -y libquartz2-java" >&2
  echo "  (it brings Quartz 2.3.2 and slf4j; a JDK 11+ must be installed too: apt-get install -y default-jdk-headless)" >&2
  exit 3
fi
for tool in javac java; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "run.sh: $tool not found: install a JDK (apt-get install -y default-jdk-headless)" >&2
    exit 3
  fi
done
cp="$quartz"
for f in slf4j-api.jar slf4j-nop.jar; do
  if [ -f "$J/$f" ]; then cp="$cp:$J/$f"; else echo "run.sh: missing $J/$f (apt-get install -y libslf4j-java)" >&2; exit 3; fi
done
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
javac -nowarn -Xlint:none -encoding UTF-8 -cp "$cp" -d "$build" "$here/QuartzOracle.java" 2> "$build/javac.log" || {
  cat "$build/javac.log" >&2; exit 1; }
java -cp "$build:$cp" QuartzOracle "$@"

#!/usr/bin/env bash
# Quartz's CronExpression on chime's `bench schedule` set, one thread (-XX:ActiveProcessorCount=1
# keeps the JIT and GC from borrowing the other core). Needs libquartz2-java and a JDK.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
jar=/usr/share/java/quartz2.jar
[ -f "$jar" ] || { echo "install Quartz: apt-get install -y libquartz2-java" >&2; exit 1; }
out=$(mktemp -d)
javac -cp "$jar" -d "$out" "$here/QuartzCronBench.java"
java -XX:ActiveProcessorCount=1 -cp "$jar:/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-nop.jar:$out" QuartzCronBench "${1:-3}"
rm -rf "$out"

#!/usr/bin/env bash
# Feed the reference vectors (stripped to id/trigger/calendar/count) through the oracle and
# diff the answer with the file itself: no output and exit 0 means reproduced byte for byte.
#   scripts/quartz-oracle/check-vectors.sh [VECTORS]   (default: tests/data/quartz-2.3.2-schedules.jsonl)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
vectors="${1:-$here/../../tests/data/quartz-2.3.2-schedules.jsonl}"
python3 -c '
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    print(json.dumps({k: d.get(k) for k in ("id", "trigger", "calendar", "count")}, separators=(",", ":")))
' "$vectors" | "$here/run.sh" | diff - "$vectors"
echo "vectors reproduced exactly: $vectors" >&2

#!/usr/bin/env bash
# Regenerate tests/data/quartz-oracle.jsonl: corpus (gen_cases.py) -> Quartz (run.sh) -> horizon filter.
#   scripts/quartz-oracle/regen.sh [OUTPUT]      (default: tests/data/quartz-oracle.jsonl)
# Cases whose fire times reach 2120 or later are dropped: Quartz gives up scheduling after
# "current year + 100" (CronExpression.MAX_YEAR, 2126 when run in 2026), so their answers would
# change with the year the oracle runs in.  See NOTES.md ("The give-up horizon").
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/tests/data/quartz-oracle.jsonl}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 "$here/gen_cases.py" > "$tmp/cases.jsonl"
"$here/run.sh" < "$tmp/cases.jsonl" > "$tmp/answers.jsonl"
python3 - "$tmp/answers.jsonl" "$out" <<'PY'
import json, sys
kept, dropped, bad = [], [], []
for line in open(sys.argv[1]):
    d = json.loads(line)
    if "oracle_error" in d:
        bad.append(d["id"])
    elif any(f >= "2120" for f in d.get("fires", [])):
        dropped.append(d["id"])
    else:
        kept.append(line)
if bad:
    sys.exit("oracle_error in %d cases (fix the generator): %s" % (len(bad), " ".join(bad)))
with open(sys.argv[2], "w") as f:
    f.writelines(kept)
print("wrote %d cases to %s; dropped %d near the give-up horizon: %s"
      % (len(kept), sys.argv[2], len(dropped), " ".join(dropped)), file=sys.stderr)
PY

#!/usr/bin/env python3
"""Write the input corpus for the Quartz 2.3.2 oracle (QuartzOracle.java) as JSONL on stdout.

Stdlib only, fixed seed: the same Python and tz database give the same corpus byte for byte.
Each line is {"id","trigger","calendar","count"}; feed it to run.sh to get Quartz's answers:

    python3 scripts/quartz-oracle/gen_cases.py > /tmp/cases.jsonl
    scripts/quartz-oracle/run.sh < /tmp/cases.jsonl > tests/data/quartz-oracle.jsonl

zoneinfo is used only to pick interesting instants (local times next to DST transitions, local
month ends); the answers come from Quartz.  Five-field (Unix) cron is deliberately absent: it is
not Quartz syntax.
"""
import datetime as dt
import json
import random
import sys
from zoneinfo import ZoneInfo

R = random.Random(20261121)

ZONES = ["America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kathmandu",
         "America/Sao_Paulo", "Pacific/Chatham", "Europe/Berlin", "UTC", "Asia/Tokyo",
         "America/St_Johns"]
# zones whose DST we aim at, with the years to look for transitions in (Sao Paulo: DST ended 2019,
# its old transitions were at local midnight; Kathmandu moved from +05:30 to +05:45 at midnight 1986)
DST_YEARS = {"America/New_York": [2026, 2027], "Europe/London": [2026, 2028],
             "Australia/Lord_Howe": [2026, 2027], "America/Sao_Paulo": [2017, 2018],
             "Pacific/Chatham": [2026, 2027], "Europe/Berlin": [2026, 2027],
             "America/St_Johns": [2026, 2028], "Asia/Kathmandu": [1985]}
UTC = dt.timezone.utc
DOW = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]

cases = []
counters = {}


def add(cat, trigger, calendar=None, count=None):
    counters[cat] = counters.get(cat, 0) + 1
    cases.append({"id": "%s-%04d" % (cat, counters[cat]), "trigger": trigger,
                  "calendar": calendar, "count": count if count is not None else R.randint(5, 40)})


def rfc(t, frac=False):
    """UTC instant -> RFC 3339 like the vectors' start times (no fraction unless asked)."""
    t = t.astimezone(UTC)
    if frac:
        return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def local(zone, y, mo, d, h=0, mi=0, s=0, fold=0):
    """A local wall time in zone as an aware datetime (in a gap: the pre-transition offset)."""
    return dt.datetime(y, mo, d, h, mi, s, tzinfo=ZoneInfo(zone), fold=fold)


def transitions(zone, year):
    """[(utc instant, old offset, new offset)] of zone's offset changes in year."""
    z = ZoneInfo(zone)
    out = []
    t = dt.datetime(year, 1, 1, tzinfo=UTC)
    end = dt.datetime(year + 1, 1, 1, tzinfo=UTC)
    prev = t.astimezone(z).utcoffset()
    while t < end:
        n = t + dt.timedelta(days=1)
        off = n.astimezone(z).utcoffset()
        if off != prev:
            m = t
            while m.astimezone(z).utcoffset() == prev:  # minute resolution
                m += dt.timedelta(minutes=1)
            out.append((m, prev, off))
            prev = off
        t = n
    return out


ALL_TRANSITIONS = [(z, tr) for z, ys in DST_YEARS.items() for y in ys for tr in transitions(z, y)]


def wall(t, off):
    """UTC instant t seen with offset off (naive wall time)."""
    return (t + off).replace(tzinfo=None)


def random_instant(y0=2024, y1=2030):
    a = dt.datetime(y0, 1, 1, tzinfo=UTC).timestamp()
    b = dt.datetime(y1, 12, 31, tzinfo=UTC).timestamp()
    return dt.datetime.fromtimestamp(R.uniform(a, b), UTC).replace(microsecond=0)


def interesting_start(zone):
    """A start instant that sits on some boundary in zone (or random)."""
    k = R.randrange(12)
    y = R.choice([2024, 2025, 2026, 2027, 2028])
    if k == 0:  # fixed instants of the vectors
        return dt.datetime.fromisoformat(R.choice(["2026-01-01T00:00:00", "2026-10-24T12:00:00",
                                                   "2027-12-30T23:59:59", "2024-02-27T00:00:00",
                                                   "2026-03-07T12:00:00"])).replace(tzinfo=UTC)
    if k == 1:  # local year end
        return local(zone, y, 12, 31, 23, 59, 59)
    if k == 2:  # local month end
        mo = R.randint(1, 12)
        last = (dt.date(y + (mo == 12), mo % 12 + 1, 1) - dt.timedelta(days=1)).day
        return local(zone, y, mo, last, R.choice([0, 12, 23]), R.choice([0, 30, 59]))
    if k == 3:  # leap day surroundings, including the non-leap century 2100
        yy = R.choice([2024, 2028, 2100, 2096])
        return local(zone, yy, 2, R.choice([27, 28]), R.choice([0, 12, 23]))
    if k in (4, 5, 6):  # next to a DST transition of a zone with DST
        zs = [tr for z, tr in ALL_TRANSITIONS if z == zone]
        if zs:
            t, _, _ = R.choice(zs)
            return t - dt.timedelta(minutes=R.choice([1, 30, 61, 60 * 5, 60 * 24, 60 * 47]))
    if k == 7:  # local midnight
        d = random_instant().astimezone(ZoneInfo(zone))
        return local(zone, d.year, d.month, d.day)
    return random_instant()


def pick_zone():
    return R.choice(ZONES)


# ------------------------------------------------------------------ cron (curated)
CRON_VALID = [
    # seconds / minutes / hours
    "0 0 12 * * ?", "0 15 10 ? * *", "0 15 10 * * ? *", "0 15 10 * * ? 2027", "0 * 14 * * ?",
    "0 0/5 14 * * ?", "0 0/5 14,18 * * ?", "0 0-5 14 * * ?", "0 10,44 14 ? 3 WED",
    "* * * * * ?", "0 * * * * ?", "0 0 * * * ?", "0 0 0 * * ?", "*/7 * * * * ?", "5/15 * * * * ?",
    "0/5 * * * * ?", "58-2 * * * * ?", "0,30 * * * * ?", "10-20 * * * * ?", "59 59 23 * * ?",
    "0 0 22-2 * * ?", "0 45-15 * * * ?", "0 0 23/2 * * ?", "0 0 0-23/6 * * ?", "0 30 */5 * * ?",
    "15 30 1-7/2 * * ?", "0 0/20 9-17 ? * MON-FRI", "0 */7 * * * ?", "30 0/20 * ? * *",
    "0 59/15 * * * ?", "0 0 5/25 * * ?", "1-59/29 * * * * ?", "0 58-3/2 * * * ?", "0 0 20-4/3 * * ?",
    "/20 * * * * ?", "0 0 12 * * ? */3",
    # day of month
    "0 15 10 15 * ?", "0 15 10 L * ?", "0 15 10 L-2 * ?", "0 0 0 L * ?", "0 0 0 L-3 * ?",
    "0 0 0 L-0 * ?", "0 0 0 L-30 * ?", "0 0 0 L-15 * ?", "0 0 0 L-28 * ?", "0 0 0 15W * ?",
    "0 0 0 1W * ?", "0 0 0 31W * ?", "0 0 0 30W * ?", "0 0 0 LW * ?", "0 0 0 L-3W * ?",
    "0 0 0 28-3 * ?", "0 0 0 31 * ?", "0 0 0 29 2 ?", "0 0 0 30 2 ?", "0 0 0 1,15 * ?",
    "0 0 0 1-31/10 * ?", "0 0 0 */7 * ?", "0 0 0 5/10 * ?", "0 0 12 1/5 * ?", "0 0 0 20-10/4 * ?",
    "0 0 0 L-1W * ?", "0 0 0 2W * ?", "0 0 0 16W * ?", "0 0 0 29-2 * ?", "0 0 0 L 2 ?",
    # month
    "0 0 0 1 NOV-FEB ?", "0 0 0 1 12-2 ?", "0 0 0 1 JAN-DEC/3 ?", "0 0 0 1 2/3 ?",
    "0 0 0 1 jan,Jul ?", "0 0 0 1 */5 ?", "0 0 0 L FEB ?", "0 0 12 29 FEB ?", "0 11 11 11 11 ?",
    "0 0 1 1 JAN-DEC/3 ?", "0 0 0 1 OCT-MAR/2 ?", "0 0 0 1 Nov-feb ?", "0 0 0 31 1-12 ?",
    # day of week
    "0 15 10 ? * MON-FRI", "0 0 12 ? * FRI-MON", "0 0 12 ? * SAT-SUN", "0 0 12 ? * 7-1",
    "0 0 12 ? * 1-7/2", "0 0 12 ? * */3", "0 0 12 ? * 2/2", "0 0 12 ? * mon,wed,FRI",
    "0 0 12 ? * sun", "0 0 12 ? * L", "0 0 12 ? * 1L", "0 0 12 ? * FRIL", "0 0 12 ? * 7L",
    "0 15 10 ? * 6L", "0 0 12 ? * SUNL", "0 15 10 ? * 6#3", "0 0 12 ? * 2#3", "0 0 12 ? * 7#5",
    "0 0 12 ? * 1#5", "0 0 12 ? * MON#1", "0 0 12 ? * 6#5", "0 0 12 ? * 2#4", "0 0 0 ? * 2#5",
    "0 0 12 ? JAN,JUL MON#1", "0 0 9-17/2 ? * MON-FRI", "0 0 12 ? * 3-3", "0 0 12 ? * TUE-TUE",
    "0 0 0 ? * 7", "0 0 0 ? * 5L", "0 0 12 ? * 6-2", "0 0 12 ? * WED-TUE", "0 0 0 ? 2 1#5",
    "0 0 12 ? jan-mar SUN#2", "0 0 12 ? * 4/3", "0 0 12 ? * Sat,sUn",
    # year
    "0 0 12 1 1 ? 2026-2030", "0 0 12 1 1 ? 2026/2", "0 0 12 * * ? 2099", "0 0 0 1 1 ? 2100-2125/5",
    "0 0 12 29 2 ? 2024-2040", "0 0 12 ? * 6L 2027", "0 15 10 ? * 6L 2026-2028",
    "0 0 0 1 1 ? 2200", "0 0 0 1 1 ? */10", "0 0 0 1 1 ? 1970-2026", "0 0 0 1 * ? 2027,2029,2031",
    "0 0 0 29 2 ? 2096-2108", "0 0 0 1 1 ? 2125-2126", "0 0 0 29 2 ? 2027",
    # spacing and case
    " 0 0 12 * * ? ", "0  0  12 * * ?", "0\t0\t12\t*\t*\t?", "0 0 12 ? * mon-fri",
    "0 0 12 ? Jan-Mar Sun#2", "0 0 12 ? * 2-6 *",
    # steps over wrapped ranges, and steps after names (which Quartz ignores)
    "0 0 0 ? * 2-1/2", "0 0 0 ? * 6-3/3", "0 0 0 ? * 6-3", "0 0 0 1 11-2/2 ?", "0 0 0 1 NOV-FEB/2 ?",
    "0 0 0 ? * MON-SUN/2", "0 0 0 1 FEB/2 ?", "0 0 0 1 2/2 ?", "0 0 22-2/2 * * ?", "0 50-10/5 0 * * ?",
    "0 0 0 28-3/2 * ?", "0 0 0 ? * SUN-SAT/3", "0 0 0 1 JAN-DEC/5 ?",
]

# Candidates for rejection (and a few near-misses that Quartz may well accept: the oracle says).
CRON_SYNTAX = [
    "0 60 12 * * ?", "60 0 12 * * ?", "0 0 24 * * ?", "0 0 12 32 * ?", "0 0 12 0 * ?",
    "0 0 12 * 13 ?", "0 0 12 * 0 ?", "0 0 12 ? * 0", "0 0 12 ? * 8", "0 0 12 ? * FOO",
    "0 0 12 * FOO ?", "0 0 12 * JANUARY ?", "0 0 12 ? * MONDAY", "0 0 12 ? * ?", "0 0 12 * * *",
    "0 0 12 1 * MON", "0 0 12 1 * 2#3", "0 0 12 L * MON", "garbage", "", "0", "0 0", "0 0 12",
    "0 0 12 *", "0 0 12 * * ? 2026 extra", "0 0/0 * * * ?", "0 0/61 * * * ?", "0 0 0/25 * * ?",
    "0 0 0 1/32 * ?", "0 0 0 1 1/13 ?", "0 0 0 ? * 1/8", "*/ * * * * ?", "0 0/ * * * ?",
    "0 0 0 1,L * ?", "0 0 0 L,15 * ?", "0 0 0 LW,1 * ?", "0 0 0 ? * 5,L", "0 0 0 ? * 5L,6L",
    "0 0 0 ? * 2#1,3#2", "0 0 0 ? * 2#6", "0 0 0 ? * 2#0", "0 0 0 ? * 8#1", "0 0 0 32W * ?",
    "0 0 0 L-31 * ?", "0 0 L * * ?", "L 0 0 * * ?", "0 0 0 W * ?", "0 0 0 1-5W * ?",
    "0 0 0 ? * L-2", "0 0 0 * * ? 2030-2028", "0 0 0 * * ? 1969", "? 0 0 * * ?", "0 ? 0 * * ?",
    "0 0 0 ? ? *", "0 0 0 1 * ?x", "0 0 0 ?5 * ?", "0 0 0 #2 * ?", "0 0 0 1#2 * ?",
    "0 0 0 ? * #2", "0 0 0 * * ? 1970-", "0 0 0 -1 * ?", "0 0 0 1--3 * ?", "0 0 0 1- * ?",
    "0 0 0 1,,2 * ?", "0 0 0 ,1 * ?", "0 0 0 1, * ?", "0 0 0 * JAN-FOO ?", "0 0 0 ? * MON-FOO",
    "0 0 0 ? * SUN-8", "0 0 0 ? * 1-8", "0 0 12 ? * 6L#2", "-1 0 0 * * ?", "0 0 0 31 2 ?",
    "1.5 0 0 * * ?", "0 0 0 1 1 ? 99999", "0 0 0 ? * MON/2", "0 0 0 ? * 2L-3", "0 0 0 LW-2 * ?",
    "0 0 0 L-3L * ?", "0 0 0 15WL * ?", "0 0 0 LL * ?", "0 0 0 ? * LL", "0 0 0 ? * 1#1#1",
    "0 0 0 1 1 ? 2026 2027", "0 0 0 1-40 * ?", "0 0 0-30 * * ?", "0 0-60 0 * * ?",
    "0 0 0 * * ? 2026-3000", "0 0 0 1 JAN-13 ?", "* * * * * * *", "? * * * * ?", "0 0 0 L-W * ?",
    "0 0 0 ? * 0-6", "0 0 0 ? * 7-8", "0 0 0 1 0-2 ?", "0 0 0 ? * MON-SUN/2", "0 0 0 ? * *#2",
    "0 0 0 L/2 * ?", "0 0 0 5/L * ?", "0 0 0 ? * 2/L", "0 0 0 1 1 ? 2026/0", "0 0 0 1W,15W * ?",
    "0 0 0 15W-20 * ?", "0 0 0 1 FEB/2 ?", "0 0 0 ? * TUE/3", "0 0 0 ? * 3#", "0 0 0 ? * #",
    "0 0 0 ? * L#3", "0 0 0 ? * 6L-2", "A 0 0 * * ?", "0 0 0 * * ?   ", "0 0 0 * * ? *,2027",
    "0 0 0 ? * 1,2#3", "0 0 0 ? * 2#3,4", "0 0 0 L-2,L-1 * ?", "0 0 0 ? * 7L,1",
]


def cron_trigger(expr, zone, start, end=None, frac=False):
    t = {"kind": "cron", "cron": expr, "time_zone": zone, "start_time": rfc(start, frac)}
    if end is not None:
        t["end_time"] = rfc(end)
    return t


def gen_cron_curated():
    for expr in CRON_VALID:
        for _ in range(3):
            z = pick_zone()
            add("cron", cron_trigger(expr, z, interesting_start(z)))
    for expr in CRON_SYNTAX:
        for _ in range(2):
            z = pick_zone()
            add("cron-syntax", cron_trigger(expr, z, interesting_start(z)), count=R.randint(5, 12))


# ------------------------------------------------------------------ cron (random fuzz)
MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]


def rcase(s):
    return R.choice([s.upper(), s.lower(), s.capitalize()])


def rfield(lo, hi, names=None, dense=False):
    """A random Quartz field over lo..hi: value, list, range (maybe wrapping), step."""
    use_names = names and R.random() < 0.4
    mix = R.random() < 0.1  # Quartz rejects most ranges that mix a name and a number: a few of those

    def v():
        x = R.randint(lo, hi)
        if (use_names and not mix) or (names and mix and R.random() < 0.5):
            return rcase(names[x - lo])
        return str(x)
    k = R.randrange(10)
    if k == 0:
        return "*"
    if k in (1, 2):
        return v()
    if k == 3:
        return ",".join(sorted({v() for _ in range(R.randint(2, 4))}))
    if k in (4, 5):
        return "%s-%s" % (v(), v())  # either order: Quartz wraps a descending range
    if k == 6:
        return "%s/%d" % (R.choice(["*", v()]), R.randint(1, max(1, (hi - lo) // 2)))
    if k == 7:
        return "%s-%s/%d" % (v(), v(), R.randint(1, 5))
    if k == 8:
        return "%s,%s-%s" % (v(), v(), v())
    return "*" if dense else v()


def rdom():
    k = R.randrange(12)
    if k == 0:
        return "L"
    if k == 1:
        return "L-%d" % R.randint(0, 30)
    if k == 2:
        return "%dW" % R.randint(1, 31)
    if k == 3:
        return "LW"
    return rfield(1, 31)


def rdow():
    k = R.randrange(12)
    if k == 0:
        return "%sL" % R.choice([str(R.randint(1, 7)), rcase(R.choice(DOW))])
    if k in (1, 2):
        return "%s#%d" % (R.choice([str(R.randint(1, 7)), rcase(R.choice(DOW))]), R.randint(1, 5))
    if k == 3:
        return "L"
    return rfield(1, 7, DOW)


def gen_cron_fuzz(n):
    for _ in range(n):
        sec = R.choice(["0", "0", "0", rfield(0, 59, dense=True)])
        mi = R.choice(["0", rfield(0, 59, dense=True)])
        hr = rfield(0, 23, dense=True)
        if R.random() < 0.5:
            dom, dow = rdom(), "?"
        else:
            dom, dow = "?", rdow()
        mo = R.choice(["*", "*", rfield(1, 12, MONTHS)])
        parts = [sec, mi, hr, dom, mo, dow]
        if R.random() < 0.25:
            parts.append(R.choice(["*", str(R.randint(2025, 2035)), "%d-%d" % (R.randint(2024, 2030), R.randint(2026, 2045)),
                                   "%d/%d" % (R.randint(2024, 2030), R.randint(1, 4))]))
        z = pick_zone()
        add("cron-fuzz", cron_trigger(" ".join(parts), z, interesting_start(z)))


# ------------------------------------------------------------------ cron around DST
def gen_cron_dst():
    for zone, (t, o1, o2) in ALL_TRANSITIONS:
        gap = o2 > o1
        lo, hi = sorted([wall(t, o1), wall(t, o2)])  # the skipped or repeated wall-clock span
        span = hi - lo
        mid = lo + span / 2
        times = [lo - dt.timedelta(minutes=1), lo, mid, hi - dt.timedelta(minutes=1), hi]
        exprs = {"30 %d %d ? * *" % (mid.minute, mid.hour)}
        for w in times:
            exprs.add("0 %d %d * * ?" % (w.minute, w.hour))
        exprs |= {"0 0/30 * * * ?", "0 0 * * * ?", "0 */15 * * * ?", "0 0 0 * * ?", "0 45 * * * ?",
                  "0 0/10 %d-%d * * ?" % ((lo.hour - 1) % 24, (hi.hour + 1) % 24),
                  "0 %d %d ? * %s" % (lo.minute, lo.hour, DOW[(lo.date().isoweekday()) % 7]),
                  "0 %d %d %d * ?" % (mid.minute, mid.hour, lo.day),
                  "0 0 %d L * ?" % lo.hour}
        for e in sorted(exprs):
            for back in R.sample([2, 30, 60 * 3, 60 * 26], 1):
                start = t - dt.timedelta(minutes=back)
                add("cron-dst", cron_trigger(e, zone, start), count=R.randint(5, 12))
        # starting inside the gap / fold itself
        for e in ["0 * * * * ?", "0 0/15 * * * ?", "*/30 * * * * ?"]:
            add("cron-dst", cron_trigger(e, zone, t - dt.timedelta(minutes=R.choice([0, 1, 5]))),
                count=R.randint(10, 40))
        if not gap:
            add("cron-dst", cron_trigger("0 * %d * * ?" % lo.hour, zone, t - dt.timedelta(hours=1)), count=40)


def gen_cron_misc():
    # fractional-second start times and offset notation, end times
    for _ in range(12):
        z = pick_zone()
        s = random_instant().replace(microsecond=R.choice([1000, 250000, 500000, 999000]))
        add("cron-misc", cron_trigger(R.choice(["* * * * * ?", "0/5 * * * * ?", "0 * * * * ?", "0 0 12 * * ?"]),
                                      z, s, frac=True), count=R.randint(5, 10))
    for _ in range(12):
        z = pick_zone()
        s = random_instant()
        e = s + dt.timedelta(hours=R.choice([0, 1, 5, 30, 24 * 10]), seconds=R.choice([0, 1, -1]))
        if e < s:
            e = s
        add("cron-misc", cron_trigger(R.choice(["0 0 * * * ?", "0 */10 * * * ?", "0 0 12 * * ?", "0 0 0 ? * MON"]), z, s, e))
    # end before start: rejected by the trigger itself
    s = random_instant()
    add("cron-misc", cron_trigger("0 0 * * * ?", "UTC", s, s - dt.timedelta(seconds=1)), count=5)
    # a gap that starts mid-hour (Chatham 02:45 -> 03:45): 03:45..03:59 exist but an hour change skips them
    for e, st in [("0 45 3 * * ?", "2026-09-26T13:00:00Z"), ("0 50 3 * * ?", "2026-09-26T13:00:00Z"),
                  ("0 0/5 3 * * ?", "2026-09-26T13:00:00Z"), ("0 * 3 * * ?", "2026-09-26T13:55:00Z"),
                  ("0 0/5 * * * ?", "2026-09-26T13:50:00Z"), ("0 45 3 27 9 ?", "2026-09-26T13:00:00Z"),
                  ("0 30 2 * * ?", "2026-09-26T13:00:00Z"), ("0 0/5 2-3 * * ?", "2026-09-26T13:30:00Z")]:
        add("cron-misc", cron_trigger(e, "Pacific/Chatham", dt.datetime.fromisoformat(st.replace("Z", "+00:00"))), count=14)
    for e, st in [("0 30 2 * * ?", "2026-10-03T13:00:00Z"), ("0 0/5 2 * * ?", "2026-10-03T15:20:00Z")]:
        add("cron-misc", cron_trigger(e, "Australia/Lord_Howe", dt.datetime.fromisoformat(st.replace("Z", "+00:00"))), count=14)
    # start written with an offset
    for off in ["+05:45", "-03:30", "+13:45", "+00:00"]:
        tr = {"kind": "cron", "cron": "0 0/30 * * * ?", "time_zone": R.choice(ZONES),
              "start_time": "2026-03-29T01:15:00" + off}
        add("cron-misc", tr, count=8)


# ------------------------------------------------------------------ simple
def simple_trigger(interval, repeat, start, end=None, frac=False):
    t = {"kind": "simple", "interval_ms": interval, "repeat_count": repeat, "start_time": rfc(start, frac)}
    if end is not None:
        t["end_time"] = rfc(end, frac)
    return t


def gen_simple():
    intervals = [1, 999, 1000, 1500, 60000, 90000, 3600000, 86400000, 604800000, 2592000000,
                 31536000000, 123456789]
    for iv in intervals:
        for rep in [0, 1, 2, 5, 10, -1, 1000]:
            s = random_instant()
            frac = R.random() < 0.2
            if frac:
                s = s.replace(microsecond=R.randrange(1000) * 1000)
            add("simple", simple_trigger(iv, rep, s, frac=frac))
        for _ in range(3):
            s = random_instant()
            e = s + dt.timedelta(milliseconds=iv * R.choice([0, 1, 3, 7]) + R.choice([-1, 0, 1]))
            if e < s:
                e = s
            add("simple", simple_trigger(iv, R.choice([-1, 5, 20]), s, e))
    s = random_instant()
    for iv, rep in [(0, 0), (0, 5), (-1, 3), (1000, -2), (0, -1)]:
        add("simple", simple_trigger(iv, rep, s), count=5)
    add("simple", simple_trigger(60000, 5, s, s - dt.timedelta(minutes=1)), count=5)


# ------------------------------------------------------------------ calendar_interval
UNITS_IV = {"second": [1, 7, 45, 3600], "minute": [1, 5, 90, 1440], "hour": [1, 5, 24, 25],
            "day": [1, 2, 3, 7, 31, 365], "week": [1, 2, 4, 52], "month": [1, 2, 3, 6, 12, 13, 25],
            "year": [1, 2, 4, 10]}


def calint_trigger(interval, unit, zone, preserve, skip, start, end=None):
    t = {"kind": "calendar_interval", "interval": interval, "unit": unit, "time_zone": zone,
         "preserve_hour_of_day_across_dst": preserve, "skip_day_if_hour_does_not_exist": skip,
         "start_time": rfc(start)}
    if end is not None:
        t["end_time"] = rfc(end)
    return t


def calint_starts(zone):
    y = R.choice([2024, 2025, 2026, 2027, 2028])
    mo = R.choice([1, 3, 5, 7, 8, 10, 12])
    k = R.randrange(7)
    if k == 0:
        return local(zone, y, mo, 31, R.choice([0, 9, 23]), R.choice([0, 30]))
    if k == 1:
        return local(zone, R.choice([2024, 2028]), 2, 29, R.choice([0, 12, 23]))
    if k == 2:
        return local(zone, y, 1, R.choice([29, 30]), 12)
    if k == 3:
        return local(zone, y, R.choice([4, 6, 9, 11]), 30, 8)
    return interesting_start(zone)


def gen_calint():
    for unit, ivs in UNITS_IV.items():
        for iv in ivs:
            for _ in range(5 if unit in ("day", "week", "month", "year") else 3):
                z = pick_zone()
                p, s = R.choice([(False, False), (True, False), (True, True), (False, True)])
                st = calint_starts(z)
                cnt = R.randint(5, 40)
                if unit == "year" and iv == 10:
                    cnt = R.randint(2, 8)
                end = None
                if R.random() < 0.15:
                    end = st + dt.timedelta(days=R.choice([1, 10, 100, 400]))
                add("calint", calint_trigger(iv, unit, z, p, s, st, end), count=cnt)
    # DST: start on a local wall time that is skipped or repeated on some later day
    for zone, (t, o1, o2) in ALL_TRANSITIONS:
        lo, hi = sorted([wall(t, o1), wall(t, o2)])
        mid = lo + (hi - lo) / 2
        for w in [lo, mid]:
            for unit, iv, days_before in [("day", 1, 3), ("day", 2, 4), ("week", 1, 7), ("month", 1, 0),
                                          ("year", 1, 0), ("hour", 1, 0), ("hour", 24, 2), ("minute", 30, 0)]:
                for p, s in R.sample([(False, False), (True, False), (True, True)], 2):
                    if unit in ("month", "year"):
                        # same wall time one month / one year earlier
                        d0 = w.date()
                        if unit == "month":
                            d0 = (d0.replace(day=1) - dt.timedelta(days=1)).replace(day=min(d0.day, 28))
                        else:
                            d0 = d0.replace(year=d0.year - 1)
                        st = dt.datetime.combine(d0, w.time()).replace(tzinfo=ZoneInfo(zone))
                    elif unit in ("hour", "minute") and days_before == 0:
                        st = t - dt.timedelta(hours=3)
                    else:
                        st = (w - dt.timedelta(days=days_before)).replace(tzinfo=ZoneInfo(zone))
                    if unit in ("hour", "minute") and (w is not lo or (p, s) != (True, False)):
                        continue  # those units ignore wall time: one variant is enough
                    # day and week steps without preserve drift by the DST shift until the trigger is
                    # more than 20 intervals old, then Quartz's big leap undoes the drift: count to 40
                    cnt = R.randint(25, 40) if unit in ("day", "week") and not p else R.randint(6, 14)
                    add("calint-dst", calint_trigger(iv, unit, zone, p, s, st), count=cnt)
    # clamping at month ends and on Feb 29, cumulative (the clamped day sticks)
    for st, unit, iv in [("2026-01-31T12:00:00Z", "month", 1), ("2026-01-31T12:00:00Z", "month", 2),
                         ("2026-03-31T12:00:00Z", "month", 1), ("2024-02-29T00:00:00Z", "year", 1),
                         ("2024-02-29T00:00:00Z", "year", 4), ("2024-02-29T00:00:00Z", "month", 12),
                         ("2024-02-29T00:00:00Z", "month", 1), ("2023-12-31T23:00:00Z", "month", 2),
                         ("2096-02-29T00:00:00Z", "year", 4), ("2026-08-31T00:00:00Z", "month", 6)]:
        add("calint", calint_trigger(iv, unit, "UTC", False, False,
                                     dt.datetime.fromisoformat(st.replace("Z", "+00:00"))), count=14)
    # day/week steps across DST without preserve, long enough to see the big-leap jump back
    for zone, st, unit in [("America/New_York", "2026-03-05T07:00:00Z", "day"),
                           ("Europe/London", "2026-03-27T01:30:00Z", "day"),
                           ("America/New_York", "2026-03-01T07:30:00Z", "week"),
                           ("Australia/Lord_Howe", "2026-10-01T15:15:00Z", "day"),
                           ("America/New_York", "2026-10-29T05:30:00Z", "day"),
                           ("Europe/Berlin", "2026-10-20T00:30:00Z", "day")]:
        for p in (False, True):
            add("calint", calint_trigger(1, unit, zone, p, False, dt.datetime.fromisoformat(st.replace("Z", "+00:00"))),
                count=40)
    # invalid intervals
    for iv in [0, -1]:
        add("calint", calint_trigger(iv, R.choice(list(UNITS_IV)), "UTC", False, False, random_instant()), count=5)


# ------------------------------------------------------------------ daily_time_interval
DTI_UNITS = {"second": [1, 30, 45, 90, 3600, 86400, 86401], "minute": [1, 7, 15, 45, 60, 90, 1440, 1441],
             "hour": [1, 2, 3, 5, 24, 25]}
WINDOWS = [("09:00:00", "17:00:00"), ("00:00:00", "23:59:59"), ("08:00:00", "08:00:00"),
           ("22:00:00", "23:59:59"), ("01:00:00", "04:00:00"), ("23:30:00", "23:59:59"),
           ("12:00:00", "13:00:00"), ("00:00:00", "00:00:00"), ("17:00:00", "09:00:00"),
           ("00:00:00", "00:00:59"), ("09:00:30", "09:59:45"), ("00:30:00", "02:30:00"),
           ("02:00:00", "03:00:00"), ("23:59:59", "23:59:59"), ("10:00:00", "10:20:00")]
DAYSETS = [DOW, ["MON", "TUE", "WED", "THU", "FRI"], ["SAT", "SUN"], ["WED"], ["SUN"],
           ["MON", "THU"], ["FRI", "SAT", "SUN", "MON"]]


def dti_trigger(iv, unit, window, days, rep, zone, start, end=None):
    t = {"kind": "daily_time_interval", "interval": iv, "unit": unit, "start_time_of_day": window[0],
         "end_time_of_day": window[1], "days_of_week": days, "repeat_count": rep, "time_zone": zone,
         "start_time": rfc(start)}
    if end is not None:
        t["end_time"] = rfc(end)
    return t


def rdays():
    if R.random() < 0.6:
        return list(R.choice(DAYSETS))
    return [d for d in DOW if R.random() < 0.5] or ["TUE"]


def gen_dti():
    for unit, ivs in DTI_UNITS.items():
        for iv in ivs:
            for _ in range(6):
                z = pick_zone()
                w = R.choice(WINDOWS)
                st = interesting_start(z)
                if R.random() < 0.4:  # start somewhere inside or around the window, unaligned
                    h, m, s = map(int, w[0].split(":"))
                    d = st.astimezone(ZoneInfo(z))
                    st = local(z, d.year, d.month, d.day, h, m, s) + dt.timedelta(seconds=R.randint(-600, 7200))
                rep = R.choice([-1, -1, -1, 0, 1, 5, 30, 100])
                end = None
                if R.random() < 0.15:
                    end = st + dt.timedelta(hours=R.choice([1, 12, 50, 200]))
                add("daily", dti_trigger(iv, unit, w, rdays(), rep, z, st, end))
    # windows across DST transitions
    for zone, (t, o1, o2) in ALL_TRANSITIONS:
        lo, hi = sorted([wall(t, o1), wall(t, o2)])
        a = (lo - dt.timedelta(hours=1)).strftime("%H:%M:%S")
        b = (hi + dt.timedelta(hours=1)).strftime("%H:%M:%S")
        if a >= b:
            a, b = "00:00:00", b
        for unit, iv in [("minute", 15), ("minute", 30), ("hour", 1), ("second", 1800), ("minute", 7)]:
            add("daily-dst", dti_trigger(iv, unit, (a, b), DOW, -1, zone, t - dt.timedelta(hours=R.choice([2, 20]))),
                count=R.randint(8, 30))
        add("daily-dst", dti_trigger(1, "hour", ("00:00:00", "23:59:59"), DOW, -1, zone, t - dt.timedelta(hours=5)),
            count=12)
        add("daily-dst", dti_trigger(1, "hour", (lo.strftime("%H:%M:%S"), "23:00:00"), DOW, -1, zone,
                                     t - dt.timedelta(days=1)), count=30)
    # validation
    st = random_instant()
    add("daily", dti_trigger(15, "minute", ("09:00:00", "17:00:00"), [], -1, "UTC", st), count=5)
    add("daily", dti_trigger(0, "minute", ("09:00:00", "17:00:00"), DOW, -1, "UTC", st), count=5)
    add("daily", dti_trigger(15, "minute", ("09:00:00", "17:00:00"), DOW, -2, "UTC", st), count=5)
    add("daily", dti_trigger(1, "day", ("09:00:00", "17:00:00"), DOW, -1, "UTC", st), count=5)
    add("daily", dti_trigger(15, "minute", ("24:00:00", "17:00:00"), DOW, -1, "UTC", st), count=5)
    add("daily", dti_trigger(15, "minute", ("09:00:00", "17:00:60"), DOW, -1, "UTC", st), count=5)


# ------------------------------------------------------------------ calendars
def rtime():
    return "%02d:%02d:%02d" % (R.randint(0, 23), R.choice([0, 0, 15, 30, 45, R.randint(0, 59)]), R.choice([0, 0, 59]))


ALL_CAL_KINDS = ["holiday", "weekly", "monthly", "annual", "daily", "daily", "cron"]
CRON_CALS = ["* * 0-7,18-23 ? * *", "* * * ? * SAT,SUN", "* * 12 * * ?", "* * * 1-7 * ?",
             "* * 9-17 ? * MON-FRI", "* * * L * ?", "* * 2 * * ?"]
CRON_CALS_FINE = ["* 0-29 * * * ?", "0-29 * * * * ?"]  # can shadow a whole-minute trigger forever


def rcalendar(depth=0, near=None, kinds=ALL_CAL_KINDS, hour_safe=False):
    """A random exclusion calendar; near (an aware datetime) steers dates to where fires are.

    kinds and hour_safe keep calendar_interval triggers (whose getFireTimeAfter walks from the start
    time, so skipping n excluded fires costs O(n^2)) away from calendars that exclude them forever.
    """
    z = R.choice(ZONES)
    k = R.choice(kinds)
    if k == "holiday":
        base = (near or random_instant()).date()
        c = {"kind": "holiday", "dates": sorted({(base + dt.timedelta(days=R.randint(-1, 20))).isoformat()
                                                 for _ in range(R.randint(1, 6))})}
    elif k == "weekly":
        c = {"kind": "weekly", "excluded_days": R.choice([["SAT", "SUN"], ["MON"], ["SUN"],
                                                          [d for d in DOW if R.random() < 0.4],
                                                          ["MON", "TUE", "WED", "THU", "FRI", "SAT"]])}
    elif k == "monthly":
        c = {"kind": "monthly", "excluded_days": sorted(R.sample(range(1, 32), R.randint(1, 8)))}
    elif k == "annual":
        days = set()
        for _ in range(R.randint(1, 5)):
            if near is not None and R.random() < 0.6:
                d = (near + dt.timedelta(days=R.randint(0, 30))).date()
            else:
                d = dt.date(2024, 1, 1) + dt.timedelta(days=R.randrange(366))
            days.add("%02d-%02d" % (d.month, d.day))
        if R.random() < 0.2:
            days.add("02-29")
        c = {"kind": "annual", "excluded_days": sorted(days)}
    elif k == "daily":
        a, b = sorted([rtime(), rtime()])
        if R.random() < 0.2:
            a, b = R.choice([("22:00:00", "23:59:59"), ("00:00:00", "06:00:00"), ("00:00:00", "23:59:59"),
                             ("09:00:00", "17:00:00"), ("12:00:00", "12:00:01")])
        inv = R.random() < 0.35
        if hour_safe:  # an excluded span under 12 h, or an included one of 2 h or more
            a, b = sorted([rtime(), rtime()])
            a, b = (a, "%02d%s" % (min(23, int(a[:2]) + R.randint(2, 11)), a[2:])) if inv else \
                (a, "%02d%s" % (min(23, int(a[:2]) + R.randint(0, 11)), a[2:]))
            if a >= b:
                a, b = "10:00:00", "14:00:00"
        c = {"kind": "daily", "range_start": a, "range_end": b, "invert": inv}
    else:
        c = {"kind": "cron", "cron": R.choice(CRON_CALS if hour_safe else CRON_CALS + CRON_CALS_FINE)}
    c["time_zone"] = z
    if depth < 2 and R.random() < 0.25:
        c["base"] = rcalendar(depth + 1, near, kinds, hour_safe)
    return c


def rtrigger_for_calendar():
    """(trigger, its start, calendar constraints)"""
    z = pick_zone()
    st = interesting_start(z)
    k = R.randrange(5)
    if k == 0:
        return cron_trigger(R.choice(["0 0 * * * ?", "0 0 0 * * ?", "0 0 12 * * ?", "0 */20 * * * ?",
                                      "0 30 9 ? * MON-FRI", "0 0 6,18 * * ?", "0 15 10 L * ?", "0 0 0 ? * 6#3"]),
                            z, st), st, {}
    if k == 1:
        return simple_trigger(R.choice([60000 * 15, 3600000, 3600000 * 5, 86400000]), R.choice([-1, -1, 5, 10, 30]),
                              st), st, {}
    if k == 2:
        u = R.choice(["hour", "day", "day", "week", "month"])
        tr = calint_trigger(R.choice([1, 1, 2, 3]), u, z, R.random() < 0.5, R.random() < 0.3, st)
        if u == "hour":
            return tr, st, {"hour_safe": True}
        if u == "day":
            return tr, st, {"kinds": ["holiday", "weekly", "monthly", "annual"]}
        return tr, st, {"kinds": ["holiday", "monthly", "annual"]}
    if k == 3:
        return dti_trigger(R.choice([15, 30, 60, 90]), "minute", R.choice(WINDOWS[:8]), rdays(),
                           R.choice([-1, -1, 5, 10, 30]), z, st), st, {}
    return dti_trigger(R.choice([1, 2, 3]), "hour", ("00:00:00", "23:59:59"), rdays(), R.choice([-1, 10]), z, st), st, {}


def gen_calendars(n):
    for _ in range(n):
        tr, st, constraints = rtrigger_for_calendar()
        add("cal", tr, rcalendar(near=st, **constraints))
    # curated: how exclusions interact with repeat counts
    s = dt.datetime(2026, 1, 2, tzinfo=UTC)
    daily_night = {"kind": "daily", "range_start": "02:00:00", "range_end": "05:59:59", "invert": False, "time_zone": "UTC"}
    weekend = {"kind": "weekly", "excluded_days": ["SAT", "SUN"], "time_zone": "UTC"}
    add("cal-semantics", simple_trigger(3600000, 10, s), daily_night, count=20)
    add("cal-semantics", simple_trigger(86400000, 10, s), weekend, count=20)
    add("cal-semantics", dti_trigger(1, "hour", ("00:00:00", "23:59:59"), DOW, 10, "UTC", s), daily_night, count=20)
    add("cal-semantics", dti_trigger(1, "hour", ("09:00:00", "10:00:00"), DOW, 10, "UTC", s), weekend, count=20)
    add("cal-semantics", calint_trigger(1, "day", "UTC", False, False, s), weekend, count=12)
    add("cal-semantics", calint_trigger(1, "day", "UTC", False, False, s, s + dt.timedelta(days=10)), weekend, count=20)
    # midnight and the DailyCalendar's day bounds
    for rng, inv in [(("22:00:00", "23:59:59"), False), (("00:00:00", "01:00:00"), False),
                     (("00:00:00", "23:59:59"), True), (("00:00:00", "12:00:00"), True),
                     (("12:00:00", "23:59:59"), True), (("00:00:01", "23:59:58"), False)]:
        cal = {"kind": "daily", "range_start": rng[0], "range_end": rng[1], "invert": inv, "time_zone": "UTC"}
        for e in ["0 0 0 * * ?", "59 59 23 * * ?", "0 0 12 * * ?", "0 0 * * * ?", "0 0 1 * * ?"]:
            add("cal-semantics", cron_trigger(e, "UTC", s), cal, count=8)
    # calendar in another zone than the trigger
    for z in ["Pacific/Chatham", "America/St_Johns", "Asia/Kathmandu"]:
        add("cal-semantics", cron_trigger("0 0 * * * ?", "UTC", s), {"kind": "weekly", "excluded_days": ["SAT", "SUN"],
                                                                   "time_zone": z}, count=40)
        add("cal-semantics", cron_trigger("0 0 */3 * * ?", "UTC", s),
            {"kind": "holiday", "dates": ["2026-01-03", "2026-01-05"], "time_zone": z}, count=30)
    # a calendar that excludes everything: Quartz gives up at (current year + 100)
    add("cal-semantics", cron_trigger("0 0 0 * * ?", "UTC", s), {"kind": "weekly", "excluded_days": DOW, "time_zone": "UTC"}, count=5)
    add("cal-semantics", simple_trigger(86400000, -1, s), {"kind": "daily", "range_start": "00:00:00", "range_end": "23:59:59",
                                                           "invert": False, "time_zone": "UTC"}, count=5)
    # base chains three deep
    chain = {"kind": "holiday", "dates": ["2026-01-06", "2026-01-07"], "time_zone": "Europe/Berlin",
             "base": {"kind": "weekly", "excluded_days": ["SUN"], "time_zone": "UTC",
                      "base": {"kind": "daily", "range_start": "12:00:00", "range_end": "13:59:59", "invert": False,
                               "time_zone": "America/New_York"}}}
    add("cal-semantics", cron_trigger("0 0 * * * ?", "Europe/Berlin", s), chain, count=40)
    add("cal-semantics", simple_trigger(3600000 * 7, 30, s), chain, count=40)
    # annual with Feb 29, holiday on a DST day, monthly 29-31
    add("cal-semantics", cron_trigger("0 0 12 * * ?", "UTC", dt.datetime(2027, 2, 25, tzinfo=UTC)),
        {"kind": "annual", "excluded_days": ["02-29", "03-01"], "time_zone": "UTC"}, count=12)
    add("cal-semantics", cron_trigger("0 0 12 * * ?", "UTC", dt.datetime(2028, 2, 25, tzinfo=UTC)),
        {"kind": "annual", "excluded_days": ["02-29", "03-01"], "time_zone": "UTC"}, count=12)
    add("cal-semantics", cron_trigger("0 0 * * * ?", "America/New_York", dt.datetime(2026, 3, 7, 12, tzinfo=UTC)),
        {"kind": "holiday", "dates": ["2026-03-08"], "time_zone": "America/New_York"}, count=40)
    add("cal-semantics", cron_trigger("0 0 * * * ?", "America/Sao_Paulo", dt.datetime(2018, 11, 2, 12, tzinfo=UTC)),
        {"kind": "holiday", "dates": ["2018-11-04"], "time_zone": "America/Sao_Paulo"}, count=40)
    add("cal-semantics", cron_trigger("0 0 0 * * ?", "UTC", dt.datetime(2026, 1, 27, tzinfo=UTC)),
        {"kind": "monthly", "excluded_days": [29, 30, 31], "time_zone": "UTC"}, count=20)
    # invalid calendars
    for cal in [{"kind": "daily", "range_start": "23:00:00", "range_end": "22:00:00", "invert": False, "time_zone": "UTC"},
                {"kind": "daily", "range_start": "10:00:00", "range_end": "10:00:00", "invert": True, "time_zone": "UTC"},
                {"kind": "daily", "range_start": "24:00:00", "range_end": "23:00:00", "invert": False, "time_zone": "UTC"},
                {"kind": "monthly", "excluded_days": [0], "time_zone": "UTC"},
                {"kind": "monthly", "excluded_days": [32], "time_zone": "UTC"},
                {"kind": "cron", "cron": "* * 25 ? * *", "time_zone": "UTC"},
                {"kind": "cron", "cron": "* * * * * *", "time_zone": "UTC"},
                {"kind": "weekly", "excluded_days": [], "time_zone": "UTC"},
                {"kind": "holiday", "dates": [], "time_zone": "UTC"}]:
        add("cal-semantics", cron_trigger("0 0 12 * * ?", "UTC", s), cal, count=5)


def gen_end_semantics():
    """end_time exactly on a fire: cron and daily_time_interval include it, simple and
    calendar_interval do not (but a first fire at start_time == end_time always happens)."""
    s = dt.datetime(2026, 1, 5, tzinfo=UTC)  # a Monday
    for z in ["UTC", "America/New_York"]:
        for end in [s + dt.timedelta(hours=3), s]:
            add("end", cron_trigger("0 0 * * * ?", z, s, end), count=10)
            add("end", simple_trigger(3600000, -1, s, end), count=10)
            add("end", calint_trigger(1, "hour", z, False, False, s, end), count=10)
            add("end", calint_trigger(1, "day", z, True, False, s, end + dt.timedelta(days=2)), count=10)
            add("end", dti_trigger(1, "hour", ("00:00:00", "23:59:59"), DOW, -1, z, s, end), count=10)
    # an end time that falls in an excluded span
    cal = {"kind": "daily", "range_start": "01:30:00", "range_end": "02:30:00", "invert": False, "time_zone": "UTC"}
    add("end", simple_trigger(3600000, -1, s, s + dt.timedelta(hours=4)), cal, count=10)
    add("end", cron_trigger("0 0 * * * ?", "UTC", s, s + dt.timedelta(hours=4)), cal, count=10)


def gen_open_points():
    """The open points of ALGORITHMS.md section 9 (emulated claims), settled by the oracle."""
    ny = "America/New_York"
    everyday = DOW
    def ts(x):
        return dt.datetime.fromisoformat(x.replace("Z", "+00:00"))
    add("check", calint_trigger(1, "day", ny, False, False, ts("2026-03-01T07:30:00Z")), count=30)
    add("check", calint_trigger(1, "month", ny, False, False, ts("2026-02-08T07:30:00Z")), count=5)
    add("check", calint_trigger(1, "month", ny, True, False, ts("2026-02-08T07:30:00Z")), count=5)
    add("check", cron_trigger("0 */15 * * * ?", ny, ts("2026-11-01T04:30:00Z")), count=12)
    add("check", cron_trigger("* * * * * ?", ny, ts("2026-11-01T05:59:58Z")), count=4)
    add("check", cron_trigger("* * * * * ?", ny, ts("2026-11-01T04:59:58Z")), count=4)
    add("check", cron_trigger("0 0 0 29W * ?", "UTC", ts("2025-02-01T00:00:00Z")), count=3)
    add("check", cron_trigger("0 0 0 29W * ?", "UTC", ts("2025-01-01T00:00:00Z")), count=3)
    add("check", dti_trigger(30, "minute", ("02:30:00", "04:00:00"), everyday, -1, ny, ts("2026-03-07T12:00:00Z")), count=12)
    add("check", dti_trigger(30, "minute", ("00:30:00", "02:00:00"), everyday, -1, ny, ts("2026-10-31T12:00:00Z")), count=12)
    add("check", cron_trigger("0 0 0 * * ?", "UTC", ts("2026-01-01T00:00:00Z")),
        {"kind": "daily", "range_start": "09:00:00", "range_end": "17:00:00", "invert": False, "time_zone": "UTC"}, count=5)


def main():
    gen_cron_curated()
    gen_cron_fuzz(350)
    gen_cron_dst()
    gen_cron_misc()
    gen_simple()
    gen_calint()
    gen_dti()
    gen_calendars(420)
    gen_end_semantics()
    gen_open_points()
    out = sys.stdout
    for c in cases:
        out.write(json.dumps(c, separators=(",", ":")) + "\n")
    print("wrote %d cases: %s" % (len(cases), ", ".join("%s %d" % kv for kv in sorted(counters.items()))),
          file=sys.stderr)


if __name__ == "__main__":
    main()

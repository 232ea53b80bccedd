// Quartz 2.3.2 oracle for chime's schedule engine.
//
// Reads JSONL on stdin, one case a line: {"id":..,"trigger":{..},"calendar":{..}|null,"count":N}
// (other keys are ignored) and writes one JSONL line per case in the format of
// shared/vectors/quartz-2.3.2-schedules.jsonl:
//   {"id","trigger","calendar","count","fires":[...]}                       or
//   {"id","trigger","calendar","count","invalid":true,"error":"<Quartz's message>"[,"quartz_restriction":true]}
// Fires are what TriggerUtils.computeFireTimes(trigger, calendar, count) does: computeFirstFireTime(calendar),
// then triggered(calendar) repeatedly, exactly as a Quartz scheduler advances a trigger (see fireTimes()).
// A case the oracle itself cannot handle (bad JSON shape, unknown zone, timeout) gets "oracle_error"
// instead of fires; that is never a Quartz result. See README.md and NOTES.md beside this file.
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.text.ParseException;
import java.time.*;
import java.time.format.DateTimeFormatter;
import java.util.*;
import org.quartz.*;
import org.quartz.impl.calendar.*;
import org.quartz.impl.triggers.*;
import org.quartz.spi.OperableTrigger;

public class QuartzOracle {
    // ---------- tiny JSON (ordered objects, numbers kept as their source text) ----------
    static final Object NULL = new Object() { public String toString() { return "null"; } };
    static final class Num { final String raw; Num(String r) { raw = r; } }

    static final class Parser {
        final String s; int i;
        Parser(String s) { this.s = s; }
        Object parseTop() { Object v = value(); ws(); if (i != s.length()) throw err("trailing data"); return v; }
        RuntimeException err(String m) { return new IllegalStateException("JSON: " + m + " at " + i); }
        void ws() { while (i < s.length() && " \t\r\n".indexOf(s.charAt(i)) >= 0) i++; }
        Object value() {
            ws();
            if (i >= s.length()) throw err("unexpected end");
            char c = s.charAt(i);
            if (c == '{') {
                i++; Map<String, Object> m = new LinkedHashMap<>(); ws();
                if (s.charAt(i) == '}') { i++; return m; }
                while (true) {
                    ws(); String k = str(); ws(); expect(':'); m.put(k, value()); ws();
                    if (s.charAt(i) == ',') { i++; continue; }
                    expect('}'); return m;
                }
            }
            if (c == '[') {
                i++; List<Object> l = new ArrayList<>(); ws();
                if (s.charAt(i) == ']') { i++; return l; }
                while (true) {
                    l.add(value()); ws();
                    if (s.charAt(i) == ',') { i++; continue; }
                    expect(']'); return l;
                }
            }
            if (c == '"') return str();
            if (s.startsWith("true", i)) { i += 4; return Boolean.TRUE; }
            if (s.startsWith("false", i)) { i += 5; return Boolean.FALSE; }
            if (s.startsWith("null", i)) { i += 4; return NULL; }
            int st = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) i++;
            if (st == i) throw err("unexpected '" + c + "'");
            return new Num(s.substring(st, i));
        }
        void expect(char c) { if (i >= s.length() || s.charAt(i) != c) throw err("expected '" + c + "'"); i++; }
        String str() {
            expect('"'); StringBuilder b = new StringBuilder();
            while (true) {
                char c = s.charAt(i++);
                if (c == '"') return b.toString();
                if (c != '\\') { b.append(c); continue; }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n': b.append('\n'); break; case 't': b.append('\t'); break;
                    case 'r': b.append('\r'); break; case 'b': b.append('\b'); break;
                    case 'f': b.append('\f'); break;
                    case 'u': b.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
                    default: b.append(e);
                }
            }
        }
    }

    static void write(StringBuilder b, Object v) {
        if (v == null || v == NULL) b.append("null");
        else if (v instanceof Num) b.append(((Num) v).raw);
        else if (v instanceof Boolean || v instanceof Integer || v instanceof Long) b.append(v);
        else if (v instanceof String) {
            String s = (String) v; b.append('"');
            for (int k = 0; k < s.length(); k++) {
                char c = s.charAt(k);
                switch (c) {
                    case '"': b.append("\\\""); break; case '\\': b.append("\\\\"); break;
                    case '\n': b.append("\\n"); break; case '\t': b.append("\\t"); break;
                    case '\r': b.append("\\r"); break; case '\b': b.append("\\b"); break;
                    case '\f': b.append("\\f"); break;
                    default:
                        if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c)); else b.append(c);
                }
            }
            b.append('"');
        } else if (v instanceof Map) {
            b.append('{'); boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) b.append(','); first = false;
                write(b, e.getKey()); b.append(':'); write(b, e.getValue());
            }
            b.append('}');
        } else if (v instanceof List) {
            b.append('['); boolean first = true;
            for (Object o : (List<?>) v) { if (!first) b.append(','); first = false; write(b, o); }
            b.append(']');
        } else throw new IllegalStateException("cannot print " + v.getClass());
    }

    // ---------- errors ----------
    /** Quartz rejected the input: its own message. */
    static final class Invalid extends Exception { Invalid(String m) { super(m); } }
    /** Quartz accepted the input but threw while computing fire times. */
    static final class QuartzCrash extends Exception { QuartzCrash(String m) { super(m); } }
    /** The oracle cannot represent the case (not a Quartz verdict). */
    static final class OracleError extends RuntimeException { OracleError(String m) { super(m); } }

    // ---------- field access ----------
    static Object get(Map<String, Object> m, String k) { Object v = m.get(k); return v == NULL ? null : v; }
    static String str(Map<String, Object> m, String k, String dflt) {
        Object v = get(m, k);
        if (v == null) { if (dflt != null) return dflt; throw new OracleError("missing \"" + k + "\""); }
        if (!(v instanceof String)) throw new OracleError("\"" + k + "\" must be a string");
        return (String) v;
    }
    static long num(Map<String, Object> m, String k) {
        Object v = get(m, k);
        if (!(v instanceof Num)) throw new OracleError("\"" + k + "\" must be a number");
        return Long.parseLong(((Num) v).raw);
    }
    static boolean bool(Map<String, Object> m, String k) {
        Object v = get(m, k);
        if (v == null) return false;
        if (!(v instanceof Boolean)) throw new OracleError("\"" + k + "\" must be a boolean");
        return (Boolean) v;
    }
    static List<?> list(Map<String, Object> m, String k) {
        Object v = get(m, k);
        if (!(v instanceof List)) throw new OracleError("\"" + k + "\" must be an array");
        return (List<?>) v;
    }
    static TimeZone zone(Map<String, Object> m) {
        String id = str(m, "time_zone", "UTC");
        try { ZoneId.of(id); } catch (DateTimeException e) { throw new OracleError("unknown time zone " + id); }
        return TimeZone.getTimeZone(id); // would silently give GMT for an unknown id: checked above
    }
    static Date instant(String s) {
        try { return Date.from(OffsetDateTime.parse(s).toInstant()); }
        catch (DateTimeException e) { throw new OracleError("bad RFC 3339 time " + s); }
    }
    static final String[] DOW = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};
    static int dow(Object o) { // java.util.Calendar: SUNDAY=1 .. SATURDAY=7
        for (int k = 0; k < 7; k++) if (DOW[k].equalsIgnoreCase(String.valueOf(o))) return k + 1;
        throw new OracleError("bad day of week " + o);
    }
    static int[] hms(String s) {
        String[] p = s.split(":");
        if (p.length < 2 || p.length > 3) throw new OracleError("bad time of day " + s);
        int[] r = new int[3];
        for (int k = 0; k < p.length; k++) r[k] = Integer.parseInt(p[k]);
        return r;
    }
    static DateBuilder.IntervalUnit unit(String u) {
        switch (u) {
            case "second": return DateBuilder.IntervalUnit.SECOND;
            case "minute": return DateBuilder.IntervalUnit.MINUTE;
            case "hour": return DateBuilder.IntervalUnit.HOUR;
            case "day": return DateBuilder.IntervalUnit.DAY;
            case "week": return DateBuilder.IntervalUnit.WEEK;
            case "month": return DateBuilder.IntervalUnit.MONTH;
            case "year": return DateBuilder.IntervalUnit.YEAR;
            default: throw new OracleError("bad unit " + u);
        }
    }

    // ---------- triggers ----------
    static OperableTrigger trigger(Map<String, Object> t) throws Invalid {
        String kind = str(t, "kind", null);
        AbstractTrigger<?> tr;
        try {
            switch (kind) {
                case "cron": {
                    CronTriggerImpl c = new CronTriggerImpl();
                    TimeZone tz = zone(t);
                    CronExpression ce;
                    try { ce = new CronExpression(str(t, "cron", null)); }
                    catch (ParseException e) { throw new Invalid(e.getMessage()); }
                    ce.setTimeZone(tz);
                    c.setCronExpression(ce);
                    c.setTimeZone(tz);
                    tr = c; break;
                }
                case "simple": {
                    SimpleTriggerImpl s = new SimpleTriggerImpl();
                    s.setRepeatInterval(num(t, "interval_ms"));
                    s.setRepeatCount((int) num(t, "repeat_count"));
                    tr = s; break;
                }
                case "calendar_interval": {
                    CalendarIntervalTriggerImpl c = new CalendarIntervalTriggerImpl();
                    c.setRepeatIntervalUnit(unit(str(t, "unit", null)));
                    c.setRepeatInterval((int) num(t, "interval"));
                    c.setTimeZone(zone(t));
                    c.setPreserveHourOfDayAcrossDaylightSavings(bool(t, "preserve_hour_of_day_across_dst"));
                    c.setSkipDayIfHourDoesNotExist(bool(t, "skip_day_if_hour_does_not_exist"));
                    tr = c; break;
                }
                case "daily_time_interval": {
                    // Quartz's DailyTimeIntervalTriggerImpl has no zone: it uses the JVM default, which
                    // run() has set to this trigger's time_zone.
                    DailyTimeIntervalTriggerImpl d = new DailyTimeIntervalTriggerImpl();
                    d.setRepeatIntervalUnit(unit(str(t, "unit", null)));
                    d.setRepeatInterval((int) num(t, "interval"));
                    if (get(t, "start_time_of_day") != null) {
                        int[] a = hms(str(t, "start_time_of_day", null));
                        d.setStartTimeOfDay(new TimeOfDay(a[0], a[1], a[2]));
                    }
                    if (get(t, "end_time_of_day") != null) {
                        int[] a = hms(str(t, "end_time_of_day", null));
                        d.setEndTimeOfDay(new TimeOfDay(a[0], a[1], a[2]));
                    }
                    if (get(t, "days_of_week") != null) {
                        Set<Integer> days = new HashSet<>();
                        for (Object o : list(t, "days_of_week")) days.add(dow(o));
                        d.setDaysOfWeek(days);
                    }
                    if (get(t, "repeat_count") != null) d.setRepeatCount((int) num(t, "repeat_count"));
                    tr = d; break;
                }
                default: throw new OracleError("unknown trigger kind " + kind);
            }
            String st = str(t, "start_time", null); // Quartz would default to "now": not reproducible
            tr.setStartTime(instant(st));
            if (get(t, "end_time") != null) tr.setEndTime(instant(str(t, "end_time", null)));
        } catch (IllegalArgumentException e) {
            throw new Invalid(e.getMessage());
        }
        tr.setKey(new TriggerKey("oracle"));
        tr.setJobKey(new JobKey("oracle"));
        try { tr.validate(); } // what Scheduler.scheduleJob does first
        catch (SchedulerException e) { throw new Invalid(e.getMessage()); }
        return (OperableTrigger) tr;
    }

    // ---------- calendars ----------
    @SuppressWarnings("unchecked")
    static org.quartz.Calendar calendar(Map<String, Object> c) throws Invalid {
        org.quartz.Calendar base = null;
        if (get(c, "base") != null) base = calendar((Map<String, Object>) get(c, "base"));
        String kind = str(c, "kind", null);
        TimeZone tz = zone(c);
        try {
            switch (kind) {
                case "holiday": {
                    HolidayCalendar h = new HolidayCalendar(base);
                    h.setTimeZone(tz);
                    for (Object o : list(c, "dates")) {
                        LocalDate d;
                        try { d = LocalDate.parse(String.valueOf(o)); }
                        catch (DateTimeException e) { throw new OracleError("bad date " + o); }
                        // noon local (never in a DST gap); Quartz truncates it to its own start of day
                        java.util.Calendar j = java.util.Calendar.getInstance(tz);
                        j.clear();
                        j.set(d.getYear(), d.getMonthValue() - 1, d.getDayOfMonth(), 12, 0, 0);
                        h.addExcludedDate(j.getTime());
                    }
                    return h;
                }
                case "weekly": {
                    WeeklyCalendar w = new WeeklyCalendar(base); // excludes SAT and SUN by default: reset
                    w.setTimeZone(tz);
                    for (int k = 1; k <= 7; k++) w.setDayExcluded(k, false);
                    for (Object o : list(c, "excluded_days")) w.setDayExcluded(dow(o), true);
                    return w;
                }
                case "monthly": {
                    MonthlyCalendar m = new MonthlyCalendar(base);
                    m.setTimeZone(tz);
                    for (Object o : list(c, "excluded_days")) {
                        if (!(o instanceof Num)) throw new OracleError("monthly excluded_days must be numbers");
                        m.setDayExcluded(Integer.parseInt(((Num) o).raw), true);
                    }
                    return m;
                }
                case "annual": {
                    AnnualCalendar a = new AnnualCalendar(base);
                    a.setTimeZone(tz);
                    for (Object o : list(c, "excluded_days")) {
                        MonthDay md;
                        try { md = MonthDay.parse("--" + o); }
                        catch (DateTimeException e) { throw new OracleError("bad month-day " + o); }
                        java.util.Calendar j = java.util.Calendar.getInstance(tz);
                        j.clear();
                        j.set(2000, md.getMonthValue() - 1, md.getDayOfMonth(), 12, 0, 0); // leap year: 02-29 ok
                        a.setDayExcluded(j, true);
                    }
                    return a;
                }
                case "daily": {
                    DailyCalendar d = new DailyCalendar(base, str(c, "range_start", null), str(c, "range_end", null));
                    d.setInvertTimeRange(bool(c, "invert"));
                    d.setTimeZone(tz);
                    return d;
                }
                case "cron": {
                    try { return new CronCalendar(base, str(c, "cron", null), tz); }
                    catch (ParseException e) { throw new Invalid(e.getMessage()); }
                }
                default: throw new OracleError("unknown calendar kind " + kind);
            }
        } catch (IllegalArgumentException e) {
            throw new Invalid(e.getMessage());
        }
    }

    // ---------- one case ----------
    static final DateTimeFormatter OUT =
        DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSS'Z'").withZone(ZoneOffset.UTC);
    static final TimeZone UTC = TimeZone.getTimeZone("UTC");

    /**
     * TriggerUtils.computeFireTimes, except that it honours computeFirstFireTime's result: when that
     * is null the scheduler refuses the trigger ("will never fire"), while computeFireTimes would
     * report the trigger's stale nextFireTime (SimpleTriggerImpl leaves it at the first time past
     * the give-up year, e.g. 2127-01-01, when a calendar excludes every fire).
     */
    static List<Date> fireTimes(OperableTrigger t, org.quartz.Calendar cal, int count) {
        List<Date> out = new ArrayList<>();
        if (t.computeFirstFireTime(cal) == null) return out;
        for (int k = 0; k < count; k++) {
            Date d = t.getNextFireTime();
            if (d == null) break;
            out.add(d);
            t.triggered(cal);
        }
        return out;
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> run(Map<String, Object> in) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("id", in.containsKey("id") ? in.get("id") : NULL);
        out.put("trigger", in.containsKey("trigger") ? in.get("trigger") : NULL);
        out.put("calendar", in.containsKey("calendar") ? in.get("calendar") : NULL);
        out.put("count", in.containsKey("count") ? in.get("count") : NULL);
        try {
            Object tv = get(in, "trigger");
            if (!(tv instanceof Map)) throw new OracleError("\"trigger\" must be an object");
            Map<String, Object> t = (Map<String, Object>) tv;
            int count = (int) num(in, "count");
            TimeZone.setDefault("daily_time_interval".equals(get(t, "kind")) ? zone(t) : UTC);
            OperableTrigger trig = trigger(t);
            Object cv = get(in, "calendar");
            org.quartz.Calendar cal = null;
            if (cv != null) {
                if (!(cv instanceof Map)) throw new OracleError("\"calendar\" must be an object or null");
                cal = calendar((Map<String, Object>) cv);
            }
            List<Date> fires;
            try { fires = fireTimes(trig, cal, count); }
            catch (RuntimeException e) { throw new QuartzCrash(e.toString()); }
            List<Object> l = new ArrayList<>();
            for (Date d : fires) l.add(OUT.format(d.toInstant()));
            out.put("fires", l);
        } catch (Invalid e) {
            out.put("invalid", Boolean.TRUE);
            out.put("error", e.getMessage());
            // Quartz's own "not implemented" limitations: another engine may accept these.
            if (e.getMessage() != null && e.getMessage().contains("not implemented"))
                out.put("quartz_restriction", Boolean.TRUE);
        } catch (QuartzCrash e) {
            // Quartz accepted the trigger but throws while computing its fire times (e.g. 'L' in the
            // hours field parses to an empty set): a scheduler would fail, so an engine must reject it.
            out.put("invalid", Boolean.TRUE);
            out.put("error", e.getMessage());
            out.put("quartz_crash", Boolean.TRUE);
        } catch (OracleError e) {
            out.put("oracle_error", e.getMessage());
        } catch (RuntimeException e) { // Quartz blew up in an unexpected way: report, do not guess
            out.put("oracle_error", "unexpected " + e);
        }
        return out;
    }

    @SuppressWarnings({"unchecked", "deprecation", "removal"})
    public static void main(String[] args) throws Exception {
        long timeoutMs = Long.parseLong(System.getProperty("oracle.timeout.ms", "20000"));
        BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream w = new PrintStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16),
                                        false, "UTF-8");
        int n = 0, bad = 0;
        String line;
        while ((line = r.readLine()) != null) {
            if (line.trim().isEmpty()) continue;
            n++;
            Map<String, Object> in;
            try { in = (Map<String, Object>) new Parser(line).parseTop(); }
            catch (RuntimeException e) { System.err.println("line " + n + ": " + e.getMessage()); System.exit(2); return; }
            final Object[] res = new Object[1];
            Thread th = new Thread(() -> res[0] = run(in));
            th.setDaemon(true);
            th.start();
            th.join(timeoutMs);
            Map<String, Object> out;
            if (th.isAlive()) {
                try { th.stop(); } // JDK 17 still honours it (JDK 20+ throws); the case is abandoned either way
                catch (Throwable e) { System.err.println("could not stop a timed-out case: " + e); }
                out = new LinkedHashMap<>();
                out.put("id", in.get("id")); out.put("trigger", in.get("trigger"));
                out.put("calendar", in.containsKey("calendar") ? in.get("calendar") : NULL);
                out.put("count", in.get("count"));
                out.put("oracle_error", "timeout after " + timeoutMs + " ms");
            } else out = (Map<String, Object>) res[0];
            if (out.containsKey("oracle_error")) {
                bad++;
                StringBuilder id = new StringBuilder(); write(id, out.get("id"));
                System.err.println("oracle_error for " + id + ": " + out.get("oracle_error"));
            }
            StringBuilder b = new StringBuilder(256);
            write(b, out);
            w.print(b);
            w.print('\n');
        }
        w.flush();
        if (bad > 0) System.err.println(bad + " of " + n + " cases have oracle_error (not Quartz results)");
    }
}

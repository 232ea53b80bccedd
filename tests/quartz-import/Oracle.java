package qzfixture;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.lang.reflect.Array;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.Date;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;

import org.quartz.Calendar;
import org.quartz.CronTrigger;
import org.quartz.JobDetail;
import org.quartz.JobKey;
import org.quartz.Scheduler;
import org.quartz.SimpleTrigger;
import org.quartz.CalendarIntervalTrigger;
import org.quartz.DailyTimeIntervalTrigger;
import org.quartz.Trigger;
import org.quartz.Trigger.TriggerState;
import org.quartz.TriggerKey;
import org.quartz.impl.matchers.GroupMatcher;
import org.quartz.spi.OperableTrigger;

/**
 * Reads the fixture's schedulers back through Quartz 2.3.2 itself (never starting them: a
 * started scheduler would recover and rewrite the store) and prints JSONL on stdout:
 *
 * <ul>
 *   <li>{"type":"trigger",...,"fires":[25 epoch ms]}: Quartz's own fire times, continuing from
 *       the stored next fire time; a misfired trigger (NORMAL or BLOCKED, instruction not
 *       IGNORE, next fire more than 60 s before now) gets updateAfterMisfire(cal) first, as a
 *       starting node's misfire handling would;
 *   <li>{"type":"job",...,"data":{...}}: the JobDataMap converted by chime's documented mapping
 *       (or "data":null,"unreadable":true with the key and class chime cannot read);
 *   <li>{"type":"paused_group",...} and {"type":"calendar",...}.
 * </ul>
 *
 * <p>Run with -Duser.timezone=Europe/Berlin. Arguments: JDBC URL, user [, password].
 */
public final class Oracle {
    static final int FIRES = 25;
    static final long MISFIRE_THRESHOLD = 60_000;
    static final DateTimeFormatter RFC3339_MS =
            DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSS'Z'").withZone(ZoneOffset.UTC);

    private Oracle() {}

    /** A trigger as the store holds it, read before any fire time is computed. */
    static final class Stored {
        final String scheduler;
        final Trigger trigger;
        final TriggerState state;
        final Calendar calendar;

        Stored(String scheduler, Trigger trigger, TriggerState state, Calendar calendar) {
            this.scheduler = scheduler;
            this.trigger = trigger;
            this.state = state;
            this.calendar = calendar;
        }
    }

    public static void main(String[] args) throws Exception {
        String url = args[0];
        String user = args[1];
        String password = args.length > 2 ? args[2] : null;
        PrintStream out =
                new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        try {
            // Everything is read first, so that the fire times are computed within milliseconds
            // of one another (misfire handling reads the clock).
            List<Stored> stored = new ArrayList<>();
            for (Schedulers.Spec spec : Schedulers.ALL) {
                Scheduler s = Schedulers.open(spec, url, user, password);
                for (String group : s.getTriggerGroupNames()) {
                    for (TriggerKey key : s.getTriggerKeys(GroupMatcher.triggerGroupEquals(group))) {
                        Trigger t = s.getTrigger(key);
                        Calendar cal =
                                t.getCalendarName() == null ? null : s.getCalendar(t.getCalendarName());
                        stored.add(new Stored(spec.name, t, s.getTriggerState(key), cal));
                    }
                }
                jobs(s, spec.name, out);
                for (String group : s.getPausedTriggerGroups()) {
                    out.println(
                            "{\"type\":\"paused_group\",\"scheduler\":" + str(spec.name)
                                    + ",\"group\":" + str(group) + "}");
                }
                for (String name : s.getCalendarNames()) {
                    out.println(
                            "{\"type\":\"calendar\",\"scheduler\":" + str(spec.name)
                                    + ",\"name\":" + str(name) + "}");
                }
            }
            for (Stored t : stored) {
                out.println(trigger(t));
            }
            out.flush();
        } catch (Throwable t) {
            out.flush();
            t.printStackTrace();
            System.exit(1);
        }
        // Never shut down: shutdown() of a JDBC store may write; the threads are daemons.
        System.exit(0);
    }

    static String trigger(Stored record) {
        Trigger stored = record.trigger;
        TriggerState state = record.state;
        Calendar cal = record.calendar;
        TriggerKey key = stored.getKey();
        OperableTrigger t = (OperableTrigger) ((OperableTrigger) stored).clone();
        long now = System.currentTimeMillis();
        Date next = t.getNextFireTime();
        boolean misfired =
                (state == TriggerState.NORMAL || state == TriggerState.BLOCKED)
                        && t.getMisfireInstruction()
                                != Trigger.MISFIRE_INSTRUCTION_IGNORE_MISFIRE_POLICY
                        && next != null
                        && next.getTime() < now - MISFIRE_THRESHOLD;
        String effect = misfired ? effect(t) : "none";
        if (misfired) {
            t.updateAfterMisfire(cal);
        }
        List<Long> fires = new ArrayList<>();
        while (fires.size() < FIRES && t.getNextFireTime() != null) {
            fires.add(t.getNextFireTime().getTime());
            t.triggered(cal);
        }
        StringBuilder sb = new StringBuilder("{\"type\":\"trigger\"");
        sb.append(",\"scheduler\":").append(str(record.scheduler));
        sb.append(",\"group\":").append(str(key.getGroup()));
        sb.append(",\"name\":").append(str(key.getName()));
        sb.append(",\"kind\":").append(str(kind(stored)));
        sb.append(",\"state\":").append(str(state.name()));
        sb.append(",\"instr\":").append(stored.getMisfireInstruction());
        sb.append(",\"priority\":").append(stored.getPriority());
        sb.append(",\"calendar\":")
                .append(stored.getCalendarName() == null ? "null" : str(stored.getCalendarName()));
        sb.append(",\"job_group\":").append(str(stored.getJobKey().getGroup()));
        sb.append(",\"job_name\":").append(str(stored.getJobKey().getName()));
        sb.append(",\"description\":").append(stored.getDescription() == null ? "null" : str(stored.getDescription()));
        sb.append(",\"end_ms\":")
                .append(stored.getEndTime() == null ? "null" : String.valueOf(stored.getEndTime().getTime()));
        sb.append(",\"misfired\":").append(misfired);
        sb.append(",\"effect\":").append(str(effect));
        sb.append(",\"now_ms\":").append(now);
        sb.append(",\"fires\":[");
        for (int i = 0; i < fires.size(); i++) {
            sb.append(i == 0 ? "" : ",").append(fires.get(i));
        }
        sb.append("],\"data\":");
        try {
            StringBuilder data = new StringBuilder();
            map(data, stored.getJobDataMap().getWrappedMap());
            sb.append(data);
        } catch (Unreadable u) {
            sb.append("null,\"unreadable\":true");
        }
        return sb.append('}').toString();
    }

    /**
     * How a misfire moves the fires, by the instruction updateAfterMisfire resolves to:
     * "now_all" (a simple trigger restarted now: every fire shifts with now), "now_first" (fire
     * once now, then the schedule's own times) or "exact" (the next slot after now).
     */
    static String effect(Trigger t) {
        int instr = t.getMisfireInstruction();
        if (t instanceof SimpleTrigger) {
            int repeat = ((SimpleTrigger) t).getRepeatCount();
            if (instr == Trigger.MISFIRE_INSTRUCTION_SMART_POLICY) {
                instr = repeat == 0
                        ? SimpleTrigger.MISFIRE_INSTRUCTION_FIRE_NOW
                        : repeat == SimpleTrigger.REPEAT_INDEFINITELY
                                ? SimpleTrigger.MISFIRE_INSTRUCTION_RESCHEDULE_NEXT_WITH_REMAINING_COUNT
                                : SimpleTrigger.MISFIRE_INSTRUCTION_RESCHEDULE_NOW_WITH_EXISTING_REPEAT_COUNT;
            }
            switch (instr) {
                case SimpleTrigger.MISFIRE_INSTRUCTION_FIRE_NOW:
                case SimpleTrigger.MISFIRE_INSTRUCTION_RESCHEDULE_NOW_WITH_EXISTING_REPEAT_COUNT:
                case SimpleTrigger.MISFIRE_INSTRUCTION_RESCHEDULE_NOW_WITH_REMAINING_REPEAT_COUNT:
                    return "now_all";
                default:
                    return "exact";
            }
        }
        return instr == Trigger.MISFIRE_INSTRUCTION_SMART_POLICY
                        || instr == CronTrigger.MISFIRE_INSTRUCTION_FIRE_ONCE_NOW
                ? "now_first"
                : "exact";
    }

    static String kind(Trigger t) {
        if (t instanceof SimpleTrigger) {
            return "SIMPLE";
        }
        if (t instanceof CronTrigger) {
            return "CRON";
        }
        if (t instanceof CalendarIntervalTrigger) {
            return "CAL_INT";
        }
        if (t instanceof DailyTimeIntervalTrigger) {
            return "DAILY_I";
        }
        return t.getClass().getName();
    }

    static void jobs(Scheduler s, String scheduler, PrintStream out) throws Exception {
        for (String group : s.getJobGroupNames()) {
            for (JobKey key : s.getJobKeys(GroupMatcher.jobGroupEquals(group))) {
                JobDetail j = s.getJobDetail(key);
                StringBuilder sb = new StringBuilder("{\"type\":\"job\"");
                sb.append(",\"scheduler\":").append(str(scheduler));
                sb.append(",\"group\":").append(str(key.getGroup()));
                sb.append(",\"name\":").append(str(key.getName()));
                sb.append(",\"class\":").append(str(j.getJobClass().getName()));
                sb.append(",\"description\":").append(j.getDescription() == null ? "null" : str(j.getDescription()));
                sb.append(",\"durable\":").append(j.isDurable());
                sb.append(",\"nonconcurrent\":").append(j.isConcurrentExectionDisallowed());
                sb.append(",\"persist_data\":").append(j.isPersistJobDataAfterExecution());
                sb.append(",\"requests_recovery\":").append(j.requestsRecovery());
                sb.append(",\"data\":");
                try {
                    StringBuilder data = new StringBuilder();
                    map(data, j.getJobDataMap().getWrappedMap());
                    sb.append(data);
                } catch (Unreadable u) {
                    sb.append("null,\"unreadable\":true");
                    sb.append(",\"unreadable_key\":").append(str(u.key));
                    sb.append(",\"unreadable_class\":").append(str(u.className));
                }
                sb.append('}');
                out.println(sb);
            }
        }
    }

    // ------------------------------------------------------------------ chime's data mapping

    /** A value chime does not read (a user's own class). */
    static final class Unreadable extends Exception {
        final String className;
        String key = "";

        Unreadable(String className) {
            super(className);
            this.className = className;
        }
    }

    /** The class names chime reads as lists and maps (services/quartz-import, job_data.rs). */
    static final Set<String> LISTS =
            Set.of(
                    "java.util.ArrayList",
                    "java.util.LinkedList",
                    "java.util.HashSet",
                    "java.util.LinkedHashSet",
                    "java.util.TreeSet",
                    "java.util.Arrays$ArrayList",
                    "java.util.Vector");

    static final Set<String> MAPS =
            Set.of(
                    "java.util.HashMap",
                    "java.util.LinkedHashMap",
                    "java.util.TreeMap",
                    "java.util.Hashtable",
                    "java.util.Properties");

    static void map(StringBuilder sb, Map<?, ?> m) throws Unreadable {
        sb.append('{');
        boolean first = true;
        for (Map.Entry<?, ?> e : m.entrySet()) {
            sb.append(first ? "" : ",");
            first = false;
            sb.append(str(key(e.getKey())));
            sb.append(':');
            try {
                value(sb, e.getValue());
            } catch (Unreadable u) {
                u.key = String.valueOf(e.getKey());
                throw u;
            }
        }
        sb.append('}');
    }

    /** A map key as chime names it: a string as is, anything else as its JSON text. */
    static String key(Object k) throws Unreadable {
        if (k instanceof String) {
            return (String) k;
        }
        StringBuilder sb = new StringBuilder();
        value(sb, k);
        String json = sb.toString();
        return json.startsWith("\"") ? ((String) k.toString()) : json;
    }

    static void value(StringBuilder sb, Object v) throws Unreadable {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof String) {
            sb.append(str((String) v));
        } else if (v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte) {
            sb.append(v);
        } else if (v instanceof Double) {
            number(sb, (Double) v, Double.toString((Double) v));
        } else if (v instanceof Float) {
            number(sb, (double) (Float) v, Float.toString((Float) v));
        } else if (v instanceof Character) {
            sb.append(str(String.valueOf(v)));
        } else if (v instanceof java.sql.Timestamp) {
            throw new Unreadable(v.getClass().getName() + " (not in the fixture)");
        } else if (v instanceof Date && (v.getClass() == Date.class || v.getClass() == java.sql.Date.class)) {
            sb.append(str(RFC3339_MS.format(Instant.ofEpochMilli(((Date) v).getTime()))));
        } else if (v instanceof BigDecimal) {
            sb.append(str(bigDecimal((BigDecimal) v)));
        } else if (v instanceof BigInteger) {
            sb.append(str(v.toString()));
        } else if (v instanceof UUID) {
            sb.append(str(v.toString()));
        } else if (v instanceof Enum) {
            sb.append(str(((Enum<?>) v).name()));
        } else if (v instanceof byte[]) {
            sb.append(str(Base64.getEncoder().encodeToString((byte[]) v)));
        } else if (v instanceof char[]) {
            sb.append(str(new String((char[]) v)));
        } else if (v.getClass().isArray()) {
            sb.append('[');
            for (int i = 0; i < Array.getLength(v); i++) {
                sb.append(i == 0 ? "" : ",");
                value(sb, Array.get(v, i));
            }
            sb.append(']');
        } else if (v instanceof Collection && LISTS.contains(v.getClass().getName())) {
            sb.append('[');
            boolean first = true;
            for (Object item : (Collection<?>) v) {
                sb.append(first ? "" : ",");
                first = false;
                value(sb, item);
            }
            sb.append(']');
        } else if (v instanceof Map && MAPS.contains(v.getClass().getName())) {
            map(sb, (Map<?, ?>) v);
        } else {
            throw new Unreadable(v.getClass().getName());
        }
    }

    /** NaN and the infinities as strings (JSON has no such numbers), others as Java prints them. */
    static void number(StringBuilder sb, double d, String text) {
        if (Double.isNaN(d)) {
            sb.append("\"NaN\"");
        } else if (Double.isInfinite(d)) {
            sb.append(d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
        } else {
            sb.append(text);
        }
    }

    /**
     * A BigDecimal as chime writes it: plain decimal notation (what toPlainString gives), or the
     * unscaled digits with an exponent when that would be longer than 1000 characters.
     */
    static String bigDecimal(BigDecimal d) {
        String unscaled = d.unscaledValue().toString();
        String sign = unscaled.startsWith("-") ? "-" : "";
        String digits = sign.isEmpty() ? unscaled : unscaled.substring(1);
        long scale = d.scale();
        if (Math.abs(scale) + digits.length() > 1000) {
            long exponent = -scale;
            return sign + digits + "E" + (exponent >= 0 ? "+" : "") + exponent;
        }
        return d.toPlainString();
    }

    /** A JSON string; NUL becomes U+FFFD as in chime (PostgreSQL's jsonb holds no NUL). */
    static String str(String s) {
        StringBuilder sb = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    sb.append("\\\"");
                    break;
                case '\\':
                    sb.append("\\\\");
                    break;
                case '\n':
                    sb.append("\\n");
                    break;
                case '\r':
                    sb.append("\\r");
                    break;
                case '\t':
                    sb.append("\\t");
                    break;
                case '\u0000':
                    sb.append('\uFFFD');
                    break;
                default:
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        return sb.append('"').toString();
    }
}

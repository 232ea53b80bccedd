package qzfixture;

import java.io.InputStream;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Date;
import java.util.GregorianCalendar;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Hashtable;
import java.util.LinkedHashMap;
import java.util.LinkedList;
import java.util.List;
import java.util.Properties;
import java.util.TimeZone;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import java.util.Vector;
import java.util.concurrent.TimeUnit;

import org.quartz.CalendarIntervalScheduleBuilder;
import org.quartz.CronScheduleBuilder;
import org.quartz.DailyTimeIntervalScheduleBuilder;
import org.quartz.DateBuilder.IntervalUnit;
import org.quartz.Job;
import org.quartz.JobBuilder;
import org.quartz.JobDataMap;
import org.quartz.JobDetail;
import org.quartz.JobKey;
import org.quartz.ScheduleBuilder;
import org.quartz.Scheduler;
import org.quartz.SimpleScheduleBuilder;
import org.quartz.TimeOfDay;
import org.quartz.Trigger;
import org.quartz.TriggerBuilder;
import org.quartz.TriggerKey;
import org.quartz.impl.calendar.AnnualCalendar;
import org.quartz.impl.calendar.BaseCalendar;
import org.quartz.impl.calendar.CronCalendar;
import org.quartz.impl.calendar.DailyCalendar;
import org.quartz.impl.calendar.HolidayCalendar;
import org.quartz.impl.calendar.MonthlyCalendar;
import org.quartz.impl.calendar.WeeklyCalendar;
import org.quartz.impl.matchers.GroupMatcher;
import org.quartz.impl.triggers.AbstractTrigger;

/**
 * Builds a Quartz 2.3.2 JDBC job store with Quartz's own API, in one PostgreSQL database:
 *
 * <ul>
 *   <li>the DDL from the Quartz jar, loaded as is (QRTZ_) and with the prefix CHIME_T_;
 *   <li>schedD (QRTZ_, Java-serialized data, never started): calendars of all six kinds, jobs
 *       with typed data, triggers of the four types anchored at fixed instants around DST
 *       changes, past-due triggers, paused triggers and groups;
 *   <li>schedB (CHIME_T_, useProperties=true, never started): string data with the characters
 *       Properties text escapes, and pauseAll();
 *   <li>schedA (QRTZ_, clustered, started): a non-concurrent job requesting recovery, halted
 *       (Runtime.halt) while it runs.
 * </ul>
 *
 * <p>Run with -Duser.timezone=Europe/Berlin. Arguments: JDBC URL, user [, password].
 */
public final class MakeStore {
    private static final long DEADLINE_MS = 15_000;
    /** Trigger.MISFIRE_INSTRUCTION_IGNORE_MISFIRE_POLICY and _SMART_POLICY. */
    private static final int IGNORE = -1, SMART = 0;

    private MakeStore() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: MakeStore JDBC_URL USER [PASSWORD]");
            System.exit(2);
        }
        String url = args[0];
        String user = args[1];
        String password = args.length > 2 ? args[2] : null;
        try {
            loadDdl(url, user, password);
            buildD(Schedulers.open(Schedulers.D, url, user, password));
            buildB(Schedulers.open(Schedulers.B, url, user, password));
            runA(url, user, password);
        } catch (Throwable t) {
            t.printStackTrace();
            System.err.flush();
            Runtime.getRuntime().halt(1);
        }
    }

    // ------------------------------------------------------------------ DDL

    static Connection connect(String url, String user, String password) throws Exception {
        Properties props = new Properties();
        props.setProperty("user", user);
        if (password != null && !password.isEmpty()) {
            props.setProperty("password", password);
        }
        return DriverManager.getConnection(url, props);
    }

    /** tables_postgres.sql from the Quartz jar, statement by statement, under both prefixes. */
    static void loadDdl(String url, String user, String password) throws Exception {
        String ddl;
        try (InputStream in =
                org.quartz.Scheduler.class.getResourceAsStream(
                        "/org/quartz/impl/jdbcjobstore/tables_postgres.sql")) {
            if (in == null) {
                throw new IllegalStateException("tables_postgres.sql is not in the Quartz jar");
            }
            ddl = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        try (Connection c = connect(url, user, password); Statement s = c.createStatement()) {
            for (String prefix : new String[] {"QRTZ_", "CHIME_T_"}) {
                String text = ddl.replace("QRTZ_", prefix);
                StringBuilder kept = new StringBuilder();
                for (String line : text.split("\n")) {
                    if (!line.trim().startsWith("--")) {
                        kept.append(line).append('\n');
                    }
                }
                for (String statement : kept.toString().split(";")) {
                    String sql = statement.trim();
                    if (sql.isEmpty() || sql.equalsIgnoreCase("COMMIT")) {
                        continue;
                    }
                    s.execute(sql);
                }
            }
        }
    }

    // ------------------------------------------------------------------ helpers

    static Date at(String offsetDateTime) {
        return Date.from(OffsetDateTime.parse(offsetDateTime).toInstant());
    }

    static TimeZone zone(String id) {
        TimeZone tz = TimeZone.getTimeZone(id);
        if (!tz.getID().equals(id)) {
            throw new IllegalStateException("unknown zone " + id);
        }
        return tz;
    }

    /** Stores a trigger of `job` with Quartz's own scheduleJob. */
    static void schedule(
            Scheduler s,
            JobKey job,
            String group,
            String name,
            String start,
            String end,
            String calendar,
            int priority,
            int misfire,
            ScheduleBuilder<? extends Trigger> schedule,
            JobDataMap data)
            throws Exception {
        TriggerBuilder<? extends Trigger> b =
                TriggerBuilder.newTrigger()
                        .withIdentity(name, group)
                        .forJob(job)
                        .startAt(at(start))
                        .withPriority(priority)
                        .withDescription("fixture trigger " + group + "." + name)
                        .withSchedule(schedule);
        if (end != null) {
            b = b.endAt(at(end));
        }
        if (calendar != null) {
            b = b.modifiedByCalendar(calendar);
        }
        if (data != null) {
            b = b.usingJobData(data);
        }
        Trigger t = b.build();
        ((AbstractTrigger<?>) t).setMisfireInstruction(misfire);
        s.scheduleJob(t);
    }

    static SimpleScheduleBuilder simple(long intervalMs, int repeatCount) {
        return SimpleScheduleBuilder.simpleSchedule()
                .withIntervalInMilliseconds(intervalMs)
                .withRepeatCount(repeatCount);
    }

    static CronScheduleBuilder cron(String expression, String zone) {
        CronScheduleBuilder b = CronScheduleBuilder.cronSchedule(expression);
        return zone == null ? b : b.inTimeZone(TimeZone.getTimeZone(zone));
    }

    static CalendarIntervalScheduleBuilder calInt(int interval, IntervalUnit unit, String zone) {
        CalendarIntervalScheduleBuilder b =
                CalendarIntervalScheduleBuilder.calendarIntervalSchedule().withInterval(interval, unit);
        return zone == null ? b : b.inTimeZone(zone(zone));
    }

    static DailyTimeIntervalScheduleBuilder daily(
            int interval, IntervalUnit unit, int[] from, int[] to) {
        DailyTimeIntervalScheduleBuilder b =
                DailyTimeIntervalScheduleBuilder.dailyTimeIntervalSchedule()
                        .withInterval(interval, unit);
        if (from != null) {
            b = b.startingDailyAt(new TimeOfDay(from[0], from[1], from[2]));
        }
        if (to != null) {
            b = b.endingDailyAt(new TimeOfDay(to[0], to[1], to[2]));
        }
        return b;
    }

    static JobDataMap data(Object... keyValues) {
        JobDataMap m = new JobDataMap();
        for (int i = 0; i < keyValues.length; i += 2) {
            m.put((String) keyValues[i], keyValues[i + 1]);
        }
        return m;
    }

    static JobKey job(
            Scheduler s,
            Class<? extends Job> type,
            String group,
            String name,
            boolean durable,
            boolean recovery,
            JobDataMap data)
            throws Exception {
        JobDetail j =
                JobBuilder.newJob(type)
                        .withIdentity(name, group)
                        .storeDurably(durable)
                        .requestRecovery(recovery)
                        .withDescription("fixture job " + group + "." + name)
                        .usingJobData(data)
                        .build();
        s.addJob(j, false, true);
        return j.getKey();
    }

    // ------------------------------------------------------------------ schedD

    static void buildD(Scheduler s) throws Exception {
        // Calendars: all six kinds, zones or none (the JVM's), chains embedded by value.
        HolidayCalendar holidays = new HolidayCalendar();
        holidays.setTimeZone(zone("America/New_York"));
        holidays.setDescription("US holidays, New York days");
        holidays.addExcludedDate(at("2030-03-11T12:00:00-04:00"));
        holidays.addExcludedDate(at("2030-07-04T12:00:00-04:00"));
        holidays.addExcludedDate(at("2030-12-25T12:00:00-05:00"));
        s.addCalendar("holidays", holidays, false, false);

        WeeklyCalendar weekend = new WeeklyCalendar();
        s.addCalendar("weekend", weekend, false, false);

        WeeklyCalendar kolkata = new WeeklyCalendar(holidays);
        kolkata.setTimeZone(zone("Asia/Kolkata"));
        kolkata.setDayExcluded(java.util.Calendar.SATURDAY, false);
        kolkata.setDayExcluded(java.util.Calendar.SUNDAY, false);
        kolkata.setDayExcluded(java.util.Calendar.MONDAY, true);
        kolkata.setDayExcluded(java.util.Calendar.FRIDAY, true);
        s.addCalendar("kolkata-mon-fri", kolkata, false, false);

        MonthlyCalendar monthly = new MonthlyCalendar();
        monthly.setDayExcluded(1, true);
        monthly.setDayExcluded(15, true);
        monthly.setDayExcluded(31, true);
        s.addCalendar("monthly", monthly, false, false);

        AnnualCalendar annual = new AnnualCalendar();
        GregorianCalendar christmas = new GregorianCalendar(zone("UTC"));
        christmas.clear();
        christmas.set(2030, java.util.Calendar.DECEMBER, 25);
        GregorianCalendar newYear = new GregorianCalendar(zone("Asia/Tokyo"));
        newYear.clear();
        newYear.set(2031, java.util.Calendar.JANUARY, 1);
        GregorianCalendar leapDay = new GregorianCalendar();
        leapDay.clear();
        leapDay.set(2032, java.util.Calendar.FEBRUARY, 29);
        annual.setDayExcluded(christmas, true);
        annual.setDayExcluded(newYear, true);
        annual.setDayExcluded(leapDay, true);
        // The base is set after the days: setDayExcluded ignores a day its base excludes.
        annual.setBaseCalendar(new WeeklyCalendar());
        s.addCalendar("annual", annual, false, false);

        DailyCalendar office = new DailyCalendar("09:00:00:250", "17:00:00:750");
        s.addCalendar("daily-9-17", office, false, false);
        DailyCalendar inverted = new DailyCalendar("08:30", "18:15:30:500");
        inverted.setInvertTimeRange(true);
        s.addCalendar("daily-inverted", inverted, false, false);

        CronCalendar lunch = new CronCalendar("0 * 12-13 ? * MON-FRI");
        s.addCalendar("cron-lunch", lunch, false, false);
        CronCalendar lunchNy = new CronCalendar("0 * 12-13 ? * MON-FRI");
        lunchNy.setTimeZone(zone("America/New_York"));
        s.addCalendar("cron-lunch-ny", lunchNy, false, false);

        DailyCalendar chain = new DailyCalendar(kolkata, "09:00", "17:00");
        chain.setDescription("daily over weekly over holiday");
        s.addCalendar("chain3", chain, false, false);

        WeeklyCalendar gmt3 = new WeeklyCalendar();
        gmt3.setTimeZone(zone("GMT-03:00"));
        gmt3.setDayExcluded(java.util.Calendar.SATURDAY, false);
        gmt3.setDayExcluded(java.util.Calendar.SUNDAY, false);
        gmt3.setDayExcluded(java.util.Calendar.WEDNESDAY, true);
        s.addCalendar("weekly-gmt-3", gmt3, false, false);

        CronCalendar nights = new CronCalendar(monthly, "* * 0-5 ? * *");
        s.addCalendar("cron-chain", nights, false, false);

        BaseCalendar unused = new MonthlyCalendar();
        unused.setDescription("feriados del año");
        s.addCalendar("feriados-año", unused, false, false);

        // Jobs.
        List<String> list = new ArrayList<>(Arrays.asList("a", "b", "ç"));
        HashMap<String, Integer> counts = new HashMap<>();
        counts.put("x", 1);
        counts.put("y", 2);
        HashMap<Integer, String> byNumber = new HashMap<>();
        byNumber.put(7, "seven");
        LinkedHashMap<String, Object> nested = new LinkedHashMap<>();
        nested.put("list", new ArrayList<>(Arrays.asList(1L, 2L)));
        nested.put("when", new Date(1_900_000_000_000L));
        TreeMap<String, Object> sorted = new TreeMap<>();
        sorted.put("b", Boolean.FALSE);
        sorted.put("a", null);
        JobDataMap typed =
                data(
                        "string", "hello",
                        "int", 42,
                        "long", 9007199254740993L,
                        "negative long", -9007199254740993L,
                        "short", (short) -7,
                        "byte", (byte) 127,
                        "double", 3.25d,
                        "small double", 1.0e-7d,
                        "float", 0.1f,
                        "boolean", true,
                        "char", 'é',
                        "date", at("2030-03-31T01:00:00Z"),
                        "big decimal", new BigDecimal("12345678901234567890.000123"),
                        "scaled decimal", new BigDecimal("1E+3"),
                        "tiny decimal", new BigDecimal("-0.00012"),
                        "big integer", new BigInteger("-123456789012345678901234567890"),
                        "uuid", UUID.fromString("0f8fad5b-d9cb-469f-a165-70867728950e"),
                        "enum", TimeUnit.SECONDS,
                        "list", list,
                        "map", counts,
                        "number keys", byNumber,
                        "nested", nested,
                        "sorted", sorted,
                        "set", new HashSet<>(Arrays.asList(3, 1, 2)),
                        "bytes", new byte[] {0, 1, 2, (byte) 255},
                        "ints", new int[] {1, -2, 3},
                        "null", null,
                        "text", "日报, relatórios",
                        "nul", "a\u0000b",
                        "k\u0000ey", "a NUL in the key",
                        "emoji", "🎉 party 𝄞",
                        "long text", "日".repeat(30_000),
                        "nan", Double.NaN,
                        "-inf", Float.NEGATIVE_INFINITY,
                        "linked", new LinkedList<>(Arrays.asList("x", null, 5)),
                        "tree set", new TreeSet<>(Arrays.asList("pear", "apple", "fig")),
                        "vector", new Vector<>(Arrays.asList(1.5d, 2.5d)),
                        "as list", Arrays.asList("p", "q"),
                        "hashtable", new Hashtable<>(counts),
                        "list of maps", new ArrayList<>(Arrays.asList(counts, nested)));
        JobKey typedJob = job(s, NoopJob.class, "demo", "typed-data", true, false, typed);
        JobKey report =
                job(
                        s,
                        NoopJob.class,
                        "报表",
                        "日报",
                        false,
                        false,
                        data("标题", "日报", "lang", "pt: relatórios"));
        JobKey exclusive =
                job(s, NonConcurrentJob.class, "demo", "exclusive", false, true, data("n", 1));
        job(
                s,
                PojoJob.class,
                "demo",
                "pojo",
                true,
                false,
                data("fine", "readable", "pojo", new PojoJob.Pojo("x", 1)));
        JobKey past = job(s, NoopJob.class, "past", "catch-up", true, false, data());

        final int H = 3_600_000;
        final long DAY = 86_400_000L;

        // SIMPLE, anchored around the 2030 EU (Mar 31, Oct 27) and US (Mar 10, Nov 3) changes.
        schedule(s, typedJob, "simple", "once", "2030-03-31T01:30:00+01:00", null, null, 7, 1,
                simple(0, 0), data("origin", "once", "n", 3));
        schedule(s, typedJob, "simple", "five-with-end", "2030-03-31T00:00:00+01:00",
                "2030-03-31T03:00:00+02:00", null, 5, 3, simple(45 * 60_000, 5), null);
        schedule(s, typedJob, "simple", "every-90-weekend", "2030-10-25T22:00:00+02:00", null,
                "weekend", 3, 4, simple(90 * 60_000, -1), null);
        schedule(s, exclusive, "simple", "office-hours", "2030-11-02T08:00:00-04:00", null,
                "daily-9-17", 2, 5, simple(37 * 60_000, 40), null);
        schedule(s, exclusive, "simple", "holidays-ignore", "2030-12-20T12:00:00Z", null,
                "holidays", 10, IGNORE, simple(DAY, 30), null);
        schedule(s, typedJob, "simple", "chain-smart", "2030-03-08T00:00:00Z", null, "chain3", 6,
                SMART, simple(2 * H, 50), null);
        schedule(s, typedJob, "simple", "monthly-code2", "2031-01-30T10:00:00+01:00", null,
                "monthly", 5, 2, simple(DAY, -1), null);

        // CRON.
        schedule(s, typedJob, "cron", "ny-0230-spring", "2030-03-05T00:00:00-05:00", null, null,
                5, 2, cron("0 30 2 * * ?", "America/New_York"), null);
        schedule(s, typedJob, "cron", "ny-0230-fall", "2030-10-28T00:00:00-04:00", null, null, 5,
                SMART, cron("0 30 2 * * ?", "America/New_York"), null);
        schedule(s, typedJob, "cron", "ny-0130-fall", "2030-10-25T00:00:00-04:00", null, null, 5,
                1, cron("0 30 1 * * ?", "America/New_York"), null);
        schedule(s, typedJob, "cron", "berlin-0230-spring", "2030-03-20T00:00:00+01:00", null,
                null, 4, IGNORE, cron("0 30 2 * * ?", null), null);
        schedule(s, typedJob, "cron", "berlin-0230-fall", "2030-10-20T00:00:00+02:00", null, null,
                4, 2, cron("0 30 2 * * ?", null), null);
        schedule(s, typedJob, "cron", "l-minus-2", "2029-01-01T00:00:00+01:00", null, "weekend",
                5, IGNORE, cron("0 15 10 L-2 * ?", null), null);
        schedule(s, typedJob, "cron", "third-friday", "2029-06-01T00:00:00+02:00", null, null, 9,
                2, cron("0 0 12 ? * 6#3", null), null);
        schedule(s, exclusive, "cron", "every-7-dst", "2030-10-27T01:00:00+02:00", null, null, 5,
                SMART, cron("0 0/7 * * * ? 2030-2031", null), null);
        schedule(s, exclusive, "cron", "every-7-year-end", "2031-12-31T22:30:00+01:00", null,
                null, 5, 1, cron("0 0/7 * * * ? 2030-2031", null), null);
        schedule(s, typedJob, "cron", "ist", "2030-03-04T00:00:00Z", null, "kolkata-mon-fri", 4,
                1, cron("0 0 9 ? * MON-FRI", "IST"), data("zone", "IST"));
        schedule(s, typedJob, "cron", "lunch", "2030-03-28T00:00:00+01:00", null, "cron-lunch", 5,
                2, cron("0 0/30 11-14 ? * *", null), null);
        schedule(s, typedJob, "cron", "lunch-ny", "2030-03-28T00:00:00+01:00", null,
                "cron-lunch-ny", 5, SMART, cron("0 0/30 11-14 ? * *", null), null);
        schedule(s, report, "relatórios", "diário às 07:00", "2030-01-01T00:00:00Z", null, null, 5,
                SMART, cron("0 0 7 * * ?", "America/Sao_Paulo"), data("idioma", "português"));

        // CAL_INT.
        schedule(s, typedJob, "calint", "month-31", "2030-01-31T10:00:00+01:00", null, null, 5, 1,
                calInt(1, IntervalUnit.MONTH, null), null);
        int[] codes = {SMART, IGNORE, 2, 1};
        int k = 0;
        for (boolean preserve : new boolean[] {false, true}) {
            for (boolean skip : new boolean[] {false, true}) {
                schedule(s, typedJob, "calint",
                        "day-0230-ny-" + (preserve ? "p" : "x") + (skip ? "s" : "x"),
                        "2030-03-07T02:30:00-05:00", null, null, 5, codes[k++],
                        calInt(1, IntervalUnit.DAY, "America/New_York")
                                .preserveHourOfDayAcrossDaylightSavings(preserve)
                                .skipDayIfHourDoesNotExist(skip),
                        null);
            }
        }
        schedule(s, typedJob, "calint", "week2-monthly", "2030-10-20T01:30:00-04:00", null,
                "monthly", 5, 2, calInt(2, IntervalUnit.WEEK, "America/New_York"), null);
        schedule(s, typedJob, "calint", "year-feb29", "2028-02-29T12:00:00+01:00", null, null, 1,
                SMART, calInt(1, IntervalUnit.YEAR, null), null);
        schedule(s, exclusive, "calint", "day-annual", "2030-12-20T08:00:00+01:00", null,
                "annual", 5, IGNORE, calInt(1, IntervalUnit.DAY, null), null);
        schedule(s, typedJob, "calint", "hour5-inverted", "2030-03-30T00:00:00+01:00", null,
                "daily-inverted", 5, 2, calInt(5, IntervalUnit.HOUR, null), null);
        schedule(s, report, "relatórios", "semanal", "2030-10-21T07:00:00+02:00", null, null, 5,
                SMART, calInt(1, IntervalUnit.WEEK, "America/Sao_Paulo"), null);

        // DAILY_I (no zone: Quartz computes them in the JVM's).
        schedule(s, typedJob, "daily", "min20-weekdays", "2030-03-29T00:00:00+01:00", null, null,
                5, SMART,
                daily(20, IntervalUnit.MINUTE, new int[] {8, 0, 0}, new int[] {10, 0, 0})
                        .onMondayThroughFriday()
                        .withRepeatCount(30),
                null);
        schedule(s, typedJob, "daily", "hour3", "2030-10-26T00:00:00+02:00", null, null, 8, 1,
                daily(3, IntervalUnit.HOUR, null, null).onEveryDay(), null);
        schedule(s, exclusive, "daily", "sec45-holidays", "2030-12-24T00:00:00+01:00", null,
                "holidays", 5, 2,
                daily(45, IntervalUnit.SECOND, new int[] {9, 0, 0}, new int[] {9, 10, 0}), null);
        schedule(s, typedJob, "daily", "gap", "2030-03-30T00:00:00+01:00", null, null, 5, IGNORE,
                daily(30, IntervalUnit.MINUTE, new int[] {2, 0, 0}, new int[] {4, 0, 0}), null);
        schedule(s, typedJob, "daily", "fall-weekend", "2030-10-26T00:00:00+02:00", null,
                "weekend", 5, SMART,
                daily(40, IntervalUnit.MINUTE, new int[] {1, 30, 0}, new int[] {3, 30, 0}), null);

        // More edges: DailyCalendar's midnight quirk, W/L/# cron, Java-only zones, end times,
        // the US spring gap on a monthly day, the EU fall overlap.
        schedule(s, typedJob, "edge", "cron-midnight-quirk", "2030-03-01T00:00:00+01:00", null,
                "daily-9-17", 5, SMART, cron("0 0 0,6 * * ?", null), null);
        schedule(s, typedJob, "edge", "simple-midnight-quirk", "2030-03-01T00:00:00+01:00", null,
                "daily-9-17", 5, 4, simple(6 * H, -1), null);
        schedule(s, typedJob, "edge", "cron-lw", "2030-01-01T00:00:00+01:00", null, "holidays", 5,
                SMART, cron("0 0 12 LW * ?", null), null);
        schedule(s, typedJob, "edge", "cron-15w", "2030-01-01T00:00:00+01:00", null, null, 5, 2,
                cron("0 0 12 15W * ?", null), null);
        schedule(s, typedJob, "edge", "cron-1w", "2030-01-01T00:00:00+01:00", null, null, 5, 1,
                cron("0 0 12 1W * ?", "America/New_York"), null);
        schedule(s, typedJob, "edge", "cron-last-friday", "2030-01-01T00:00:00+01:00", null, null,
                5, IGNORE, cron("0 0 12 ? * 6L", null), null);
        schedule(s, typedJob, "edge", "cron-seconds-overlap", "2030-10-27T00:00:00+02:00", null,
                null, 5, SMART, cron("0/13 58-59 1-3 ? * *", null), null);
        schedule(s, typedJob, "edge", "cron-seconds-gap", "2030-03-31T00:00:00+01:00", null, null,
                5, SMART, cron("*/20 59 1,2,3 ? * *", null), null);
        schedule(s, typedJob, "edge", "cron-gmt+0530", "2030-03-01T00:00:00Z", null, null, 5,
                SMART, cron("0 0 9 * * ?", "GMT+05:30"), null);
        schedule(s, typedJob, "edge", "cron-pst", "2030-03-08T00:00:00Z", null, null, 5, SMART,
                cron("0 0 1 * * ?", "PST"), null);
        schedule(s, typedJob, "edge", "cron-est", "2030-03-08T00:00:00Z", null, null, 5, SMART,
                cron("0 0 8 * * ?", "EST"), null);
        schedule(s, typedJob, "edge", "cron-with-end", "2030-05-01T00:00:00+02:00",
                "2030-05-02T10:00:00+02:00", null, 5, SMART, cron("0 0 */4 * * ?", null), null);
        schedule(s, typedJob, "edge", "cron-cron-chain", "2030-05-14T00:00:00+02:00", null,
                "cron-chain", 5, SMART, cron("0 0 * * * ?", null), null);
        for (boolean preserve : new boolean[] {false, true}) {
            for (boolean skip : new boolean[] {false, true}) {
                schedule(s, typedJob, "edge",
                        "calint-month-10-0230-ny-" + (preserve ? "p" : "x") + (skip ? "s" : "x"),
                        "2030-01-10T02:30:00-05:00", null, null, 5, SMART,
                        calInt(1, IntervalUnit.MONTH, "America/New_York")
                                .preserveHourOfDayAcrossDaylightSavings(preserve)
                                .skipDayIfHourDoesNotExist(skip),
                        null);
            }
        }
        schedule(s, typedJob, "edge", "calint-day-preserve-berlin", "2030-03-29T02:30:00+01:00",
                null, null, 5, SMART,
                calInt(1, IntervalUnit.DAY, null).preserveHourOfDayAcrossDaylightSavings(true), null);
        schedule(s, typedJob, "edge", "calint-minute45-fall", "2030-10-27T00:00:00+02:00", null,
                null, 5, SMART, calInt(45, IntervalUnit.MINUTE, null), null);
        schedule(s, typedJob, "edge", "calint-week-pst", "2030-02-25T01:30:00-08:00", null,
                "weekly-gmt-3", 5, SMART, calInt(1, IntervalUnit.WEEK, "PST"), null);
        schedule(s, typedJob, "edge", "calint-day-gmt3-cal", "2030-06-01T23:30:00+02:00", null,
                "weekly-gmt-3", 5, SMART, calInt(1, IntervalUnit.DAY, null), null);
        schedule(s, typedJob, "edge", "daily-fall-every-day", "2030-10-26T00:00:00+02:00", null,
                null, 5, SMART,
                daily(40, IntervalUnit.MINUTE, new int[] {1, 30, 0}, new int[] {3, 30, 0}), null);
        schedule(s, typedJob, "edge", "daily-repeat-10", "2030-06-03T00:00:00+02:00", null, null,
                5, SMART,
                daily(15, IntervalUnit.MINUTE, new int[] {10, 0, 0}, new int[] {11, 0, 0})
                        .onDaysOfTheWeek(
                                java.util.Calendar.MONDAY,
                                java.util.Calendar.WEDNESDAY,
                                java.util.Calendar.FRIDAY)
                        .withRepeatCount(10),
                null);
        schedule(s, typedJob, "edge", "daily-end-inclusive", "2030-06-01T00:00:00+02:00", null,
                "cron-chain", 5, SMART,
                daily(2, IntervalUnit.HOUR, new int[] {8, 0, 0}, new int[] {16, 0, 0}), null);
        schedule(s, typedJob, "edge", "daily-odd-interval", "2030-06-01T00:00:00+02:00", null,
                null, 5, SMART, daily(50, IntervalUnit.MINUTE, null, null), null);
        schedule(s, typedJob, "edge", "daily-start-midday", "2030-06-01T13:17:00+02:00", null,
                null, 5, SMART,
                daily(7, IntervalUnit.HOUR, new int[] {9, 0, 0}, new int[] {23, 0, 0}), null);
        schedule(s, typedJob, "edge", "cron-fifth-monday", "2030-01-01T00:00:00+01:00", null, null,
                -3, SMART, cron("0 0 12 ? * 2#5", null), null);
        schedule(s, typedJob, "edge", "cron-weekend-numbers", "2030-03-25T00:00:00+02:00", null,
                null, Integer.MAX_VALUE, SMART, cron("0 0 12 ? * 1,7", null), null);
        schedule(s, typedJob, "edge", "cron-wrapping-ranges", "2030-03-28T00:00:00+01:00", null,
                null, 5, SMART, cron("0 30 22-2/2 ? NOV-FEB,MAR FRI-MON", null), null);
        schedule(s, typedJob, "edge", "calint-with-end", "2030-03-29T06:00:00+01:00",
                "2030-04-08T06:00:00+02:00", null, 5, SMART, calInt(2, IntervalUnit.DAY, null),
                null);
        schedule(s, typedJob, "edge", "daily-with-end", "2030-03-29T00:00:00+01:00",
                "2030-03-31T12:00:00+02:00", null, 5, SMART,
                daily(2, IntervalUnit.HOUR, new int[] {5, 0, 0}, new int[] {20, 0, 0}), null);
        // Quartz checks a DAILY_I end time only when it moves to another day: daily-with-end
        // fires once past its end (13:00); these two do not (the fire past the end is on the
        // next day, or excluded by the weekend calendar).
        schedule(s, typedJob, "edge", "daily-end-after-window", "2030-03-29T00:00:00+01:00",
                "2030-03-29T19:30:00+01:00", null, 5, SMART,
                daily(2, IntervalUnit.HOUR, new int[] {5, 0, 0}, new int[] {20, 0, 0}), null);
        schedule(s, typedJob, "edge", "daily-end-excluded", "2030-03-29T00:00:00+01:00",
                "2030-03-30T12:00:00+01:00", "weekend", 5, SMART,
                daily(2, IntervalUnit.HOUR, new int[] {5, 0, 0}, new int[] {20, 0, 0}), null);
        schedule(s, typedJob, "edge", "simple-end-cal", "2030-06-20T10:00:00+02:00",
                "2030-07-10T00:00:00+02:00", "weekly-gmt-3", 5, 5, simple(DAY, 30), null);

        // Past-due: misfired when imported, a mix of policies.
        String old = "2020-01-01T00:00:00Z";
        schedule(s, past, "past", "simple-once-smart", old, null, null, 5, SMART, simple(0, 0), null);
        schedule(s, past, "past", "simple-repeat-smart", old, null, null, 5, SMART,
                simple(H, 10), null);
        schedule(s, past, "past", "simple-forever-smart", old, null, null, 5, SMART,
                simple(90 * 60_000, -1), null);
        schedule(s, past, "past", "simple-fire-now", old, null, null, 5, 1, simple(2 * H, 5), null);
        schedule(s, past, "past", "simple-now-existing", old, null, null, 5, 2,
                simple(6 * H, 3), null);
        schedule(s, past, "past", "simple-now-remaining", old, null, null, 5, 3,
                simple(DAY, 100_000), null);
        schedule(s, past, "past", "simple-next-remaining", old, null, null, 5, 4,
                simple(H, 100_000), null);
        schedule(s, past, "past", "simple-next-existing", old, null, "weekend", 5, 5,
                simple(DAY, 100_000), null);
        schedule(s, past, "past", "simple-next-existing-done", old, null, null, 5, 5,
                simple(DAY, 20), null);
        schedule(s, past, "past", "simple-ended", old, "2021-01-01T00:00:00Z", null, 5, 2,
                simple(H, 5), null);
        schedule(s, past, "past", "simple-ignore", old, null, null, 5, IGNORE,
                simple(DAY, 3), null);
        schedule(s, past, "past", "simple-now-existing-forever", old, null, null, 5, 2,
                simple(DAY, -1), null);
        schedule(s, past, "past", "simple-now-remaining-forever", old, null, null, 5, 3,
                simple(2 * H, -1), null);
        schedule(s, past, "past", "simple-now-existing-weekend", old, null, "weekend", 5, 2,
                simple(DAY, 40), null);
        schedule(s, past, "past", "simple-now-remaining-weekend", old, null, "weekend", 5, 3,
                simple(DAY, -1), null);
        schedule(s, past, "past", "simple-fire-now-ended", old, "2021-01-01T00:00:00Z", null, 5,
                1, simple(0, 0), null);
        schedule(s, past, "past", "cron-nothing-ended", old, "2021-01-01T00:00:00Z", null, 5, 2,
                cron("0 0 12 * * ?", null), null);
        schedule(s, past, "past", "cron-smart-ended", old, "2021-01-01T00:00:00Z", null, 5,
                SMART, cron("0 0 12 * * ?", null), null);
        schedule(s, past, "past", "calint-nothing-weekend", "2020-01-01T09:00:00+01:00", null,
                "weekend", 5, 2, calInt(1, IntervalUnit.DAY, null), null);
        schedule(s, past, "past", "daily-nothing-weekend", old, null, "weekend", 5, 2,
                daily(1, IntervalUnit.HOUR, null, null), null);
        // Misfired DAILY_I triggers whose end is near now: Quartz's do-nothing searches from
        // now and can pass the end once (or finds nothing); its fire-now fires now, even after
        // the end, and then stops.
        String soon = java.time.Instant.now().plusSeconds(1800).truncatedTo(
                java.time.temporal.ChronoUnit.SECONDS).toString();
        String lately = java.time.Instant.now().minusSeconds(1800).truncatedTo(
                java.time.temporal.ChronoUnit.SECONDS).toString();
        schedule(s, past, "past", "daily-nothing-end-soon", old, soon, null, 5, 2,
                daily(1, IntervalUnit.HOUR, null, null), null);
        schedule(s, past, "past", "daily-nothing-ended", old, lately, null, 5, 2,
                daily(1, IntervalUnit.HOUR, null, null), null);
        schedule(s, past, "past", "daily-fire-now-ended", old, lately, null, 5, 1,
                daily(1, IntervalUnit.HOUR, null, null), null);
        schedule(s, past, "past", "daily-fire-now", old, null, null, 5, 1,
                daily(30, IntervalUnit.MINUTE, new int[] {7, 0, 0}, new int[] {8, 0, 0}), null);
        schedule(s, past, "past", "cron-smart", old, null, null, 5, SMART,
                cron("0 0 3 * * ?", null), null);
        schedule(s, past, "past", "cron-nothing", old, null, "weekend", 5, 2,
                cron("0 0 12 * * ?", null), null);
        schedule(s, past, "past", "cron-fire-now", old, null, null, 5, 1,
                cron("0 15 10 L-2 * ?", "America/New_York"), null);
        schedule(s, past, "past", "cron-ignore", old, null, null, 5, IGNORE,
                cron("0 0 12 1 * ?", null), null);
        schedule(s, past, "past", "calint-nothing", "2020-01-01T09:00:00+01:00", null, null, 5, 2,
                calInt(1, IntervalUnit.DAY, null), null);
        schedule(s, past, "past", "calint-fire-now", "2020-01-01T09:00:00+01:00", null, "weekend",
                5, 1, calInt(1, IntervalUnit.WEEK, "Asia/Kolkata"), null);
        schedule(s, past, "past", "daily-nothing", old, null, null, 5, 2,
                daily(20, IntervalUnit.MINUTE, new int[] {8, 0, 0}, new int[] {10, 0, 0})
                        .onMondayThroughFriday(),
                null);
        schedule(s, past, "past", "daily-smart", old, null, "holidays", 5, SMART,
                daily(3, IntervalUnit.HOUR, null, null), null);

        // Past-due relative to now, so that the repeat count ends within the fires compared:
        // 100.5 days ago, daily, 105 repeats.
        String recent =
                Instant.ofEpochMilli(System.currentTimeMillis() - 100 * DAY - DAY / 2)
                        .truncatedTo(ChronoUnit.SECONDS)
                        .toString();
        for (int code = SMART; code <= 5; code++) {
            schedule(s, past, "past-counted", "simple-code-" + code, recent, null, null, 5, code,
                    simple(DAY, 105), null);
        }
        schedule(s, past, "past-counted", "simple-code-4-weekend", recent, null, "weekend", 5, 4,
                simple(DAY, 105), null);

        // Paused: one trigger, a group with triggers (one past-due), an empty group.
        schedule(s, past, "past", "paused-one", old, null, null, 5, 1, simple(DAY, -1), null);
        s.pauseTrigger(new TriggerKey("paused-one", "past"));
        schedule(s, typedJob, "paused-grp", "p1", "2030-01-01T00:00:00+01:00", null, null, 5,
                SMART, cron("0 0 6 * * ?", null), null);
        schedule(s, past, "paused-grp", "p2-past", old, null, null, 5, 4, simple(H, -1), null);
        s.pauseTriggers(GroupMatcher.triggerGroupEquals("paused-grp"));
        s.pauseTriggers(GroupMatcher.triggerGroupEquals("future-grp"));
    }

    // ------------------------------------------------------------------ schedB

    static void buildB(Scheduler s) throws Exception {
        JobDataMap strings =
                data(
                        "plain", "value",
                        "a=b:c#d!e", "x=y:z#!w",
                        "   leading", "   spaced value",
                        "trailing", "value   ",
                        "path", "C:\\temp\\new\\file.txt",
                        "multi", "line1\nline2\r\nline3\ttab",
                        "unicode", "日本語 – ünïcödé 🎉",
                        "empty", "",
                        "", "empty key",
                        "#not a comment", "!not either",
                        "null", null);
        JobKey j = job(s, NoopJob.class, "props", "strings", true, false, strings);
        schedule(s, j, "props", "morning", "2030-01-01T00:00:00+01:00", null, null, 5, SMART,
                cron("0 0 6 * * ?", null), data("who", "trigger = data", "π", "3.14"));
        schedule(s, j, "props", "daily", "2030-06-01T12:00:00+02:00", null, null, 5, SMART,
                simple(86_400_000L, 3), null);
        s.pauseAll();
    }

    // ------------------------------------------------------------------ schedA

    static void runA(String url, String user, String password) throws Exception {
        Scheduler s = Schedulers.open(Schedulers.A, url, user, password);
        JobKey j =
                job(s, BlockingJob.class, "blocking", "job", false, true, data("runs", 0));
        long now = System.currentTimeMillis();
        for (Object[] t :
                new Object[][] {
                    {"b1", now + 2_000, 8},
                    {"b2", now + 3_600_000, 5},
                    {"b3", now + 7_200_000, 5},
                }) {
            Trigger trigger =
                    TriggerBuilder.newTrigger()
                            .withIdentity((String) t[0], "blocking")
                            .forJob(j)
                            .startAt(new Date((Long) t[1]))
                            .withPriority((Integer) t[2])
                            .usingJobData("source", (String) t[0])
                            .withSchedule(SimpleScheduleBuilder.simpleSchedule())
                            .build();
            s.scheduleJob(trigger);
        }
        s.pauseTrigger(new TriggerKey("b3", "blocking"));
        // A trigger that fires a few times before the halt (TIMES_TRIGGERED > 0), and may be
        // ACQUIRED when it comes.
        JobKey ticker = job(s, NoopJob.class, "blocking", "ticker", false, false, data());
        s.scheduleJob(
                TriggerBuilder.newTrigger()
                        .withIdentity("r1", "blocking")
                        .forJob(ticker)
                        .startAt(new Date(now + 500))
                        .withSchedule(simple(300, 20))
                        .build());
        // A daily-time-interval trigger that fires before the halt too: its repeat count ends
        // within the fires compared.
        s.scheduleJob(
                TriggerBuilder.newTrigger()
                        .withIdentity("r2", "blocking")
                        .forJob(ticker)
                        .startAt(new Date(now + 400))
                        .withSchedule(
                                DailyTimeIntervalScheduleBuilder.dailyTimeIntervalSchedule()
                                        .withInterval(1, IntervalUnit.SECOND)
                                        .withRepeatCount(8))
                        .build());
        s.start();
        if (!BlockingJob.STARTED.await(DEADLINE_MS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("b1 did not start executing within " + DEADLINE_MS + " ms");
        }
        // What the halt must leave behind, committed: wait for it with a deadline.
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        try (Connection c = connect(url, user, password)) {
            while (true) {
                String states = states(c);
                if (states.equals("b2=BLOCKED b3=PAUSED_BLOCKED executing=1 checkins=1")) {
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("schedA never reached its state: " + states);
                }
                Thread.sleep(50);
            }
        }
        System.err.println("MakeStore: schedA halted while b1 runs");
        System.err.flush();
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }

    static String states(Connection c) throws Exception {
        StringBuilder out = new StringBuilder();
        try (PreparedStatement ps =
                c.prepareStatement(
                        "SELECT trigger_name, trigger_state FROM qrtz_triggers"
                                + " WHERE sched_name = 'schedA' AND trigger_name IN ('b2', 'b3')"
                                + " ORDER BY trigger_name")) {
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    out.append(rs.getString(1)).append('=').append(rs.getString(2)).append(' ');
                }
            }
        }
        try (PreparedStatement ps =
                c.prepareStatement(
                        "SELECT (SELECT count(*) FROM qrtz_fired_triggers WHERE sched_name ="
                                + " 'schedA' AND state = 'EXECUTING'), (SELECT count(*) FROM"
                                + " qrtz_scheduler_state WHERE sched_name = 'schedA')")) {
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                out.append("executing=").append(rs.getLong(1));
                out.append(" checkins=").append(rs.getLong(2));
            }
        }
        return out.toString();
    }
}

// Quartz 2.3.2's CronExpression on the same set as `chime bench schedule`: 16 expressions x 5
// zones, 10 successive fires each, on one thread, for N seconds (after a warm-up of N seconds).
// Run: scripts/peer-bench/quartz-cron-bench.sh [seconds]
import java.util.*;
import org.quartz.CronExpression;

public class QuartzCronBench {
    static final String[] EXPRESSIONS = {
        "0 15 10 ? * 6L", "0 0 12 L-2 * ?", "0 0 0 15W * ?", "0 0 0 LW * ?",
        "0 0 12 ? JAN,JUL MON#1", "0 0 9-17/2 ? * MON-FRI", "*/7 * * * * ?", "30 0/20 * ? * *",
        "0 45-15 * * * ?", "0 0 22-2 ? * FRI-MON", "0 30 1 * * ?", "0 30 2 * * ?",
        "0 11 11 11 11 ?", "0 0 12 ? * SUNL", "0 15 10 * * ? 2027-2030", "0 0 0 29 2 ?",
    };
    static final String[] ZONES = {
        "UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kathmandu",
    };

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 3.0;
        List<CronExpression> cases = new ArrayList<>();
        for (String e : EXPRESSIONS) {
            for (String z : ZONES) {
                CronExpression c = new CronExpression(e);
                c.setTimeZone(TimeZone.getTimeZone(z));
                cases.add(c);
            }
        }
        Date from = new Date(1772323200000L); // 2026-03-01T00:00:00Z
        run(cases, from, seconds); // warm-up: let the JIT compile
        long[] r = run(cases, from, seconds);
        double elapsed = r[1] / 1e9;
        System.out.printf("quartz cron next_fire_per_s=%.0f computations=%d seconds=%.2f expressions=%d zones=%d fires_each=10%n",
            r[0] / elapsed, r[0], elapsed, EXPRESSIONS.length, ZONES.length);
    }

    static long[] run(List<CronExpression> cases, Date from, double seconds) {
        long start = System.nanoTime(), limit = (long) (seconds * 1e9), n = 0, sink = 0;
        while (System.nanoTime() - start < limit) {
            for (CronExpression c : cases) {
                Date at = from;
                for (int i = 0; i < 10; i++) {
                    Date next = c.getTimeAfter(at);
                    if (next == null) break;
                    at = next;
                    n++;
                }
                sink += at.getTime();
            }
        }
        if (sink == 42) System.out.print("");
        return new long[] {n, System.nanoTime() - start};
    }
}

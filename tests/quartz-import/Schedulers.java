package qzfixture;

import java.util.Properties;

import org.quartz.Scheduler;
import org.quartz.SchedulerException;
import org.quartz.impl.StdSchedulerFactory;

/**
 * The fixture's three Quartz schedulers and their configuration, shared by MakeStore (which fills
 * them) and Oracle (which reads them back without ever starting them).
 */
public final class Schedulers {
    /** One scheduler of the fixture. */
    public static final class Spec {
        public final String name;
        public final String prefix;
        public final boolean useProperties;
        public final boolean clustered;
        public final int threads;

        Spec(String name, String prefix, boolean useProperties, boolean clustered, int threads) {
            this.name = name;
            this.prefix = prefix;
            this.useProperties = useProperties;
            this.clustered = clustered;
            this.threads = threads;
        }
    }

    /** The catalogue: every trigger type, calendar kind and data type; never started. */
    public static final Spec D = new Spec("schedD", "QRTZ_", false, false, 1);
    /** Properties-mode job data under a second table prefix; pauseAll(). */
    public static final Spec B = new Spec("schedB", "CHIME_T_", true, false, 1);
    /** A clustered scheduler halted while a job runs. */
    public static final Spec A = new Spec("schedA", "QRTZ_", false, true, 4);

    public static final Spec[] ALL = {D, B, A};

    private Schedulers() {}

    /** The Quartz properties of `spec` on the database at `url`. */
    public static Properties properties(Spec spec, String url, String user, String password) {
        Properties p = new Properties();
        p.setProperty("org.quartz.scheduler.instanceName", spec.name);
        p.setProperty("org.quartz.scheduler.instanceId", spec.clustered ? "AUTO" : "NON_CLUSTERED");
        p.setProperty("org.quartz.scheduler.skipUpdateCheck", "true");
        p.setProperty("org.quartz.scheduler.makeSchedulerThreadDaemon", "true");
        p.setProperty("org.quartz.threadPool.class", "org.quartz.simpl.SimpleThreadPool");
        p.setProperty("org.quartz.threadPool.threadCount", Integer.toString(spec.threads));
        p.setProperty("org.quartz.threadPool.makeThreadsDaemons", "true");
        p.setProperty("org.quartz.jobStore.class", "org.quartz.impl.jdbcjobstore.JobStoreTX");
        p.setProperty(
                "org.quartz.jobStore.driverDelegateClass",
                "org.quartz.impl.jdbcjobstore.PostgreSQLDelegate");
        p.setProperty("org.quartz.jobStore.dataSource", "ds");
        p.setProperty("org.quartz.jobStore.tablePrefix", spec.prefix);
        p.setProperty("org.quartz.jobStore.useProperties", Boolean.toString(spec.useProperties));
        p.setProperty("org.quartz.jobStore.isClustered", Boolean.toString(spec.clustered));
        p.setProperty("org.quartz.jobStore.misfireThreshold", "60000");
        p.setProperty(
                "org.quartz.dataSource.ds.connectionProvider.class",
                DmConnectionProvider.class.getName());
        p.setProperty("org.quartz.dataSource.ds.url", url);
        if (user != null && !user.isEmpty()) {
            p.setProperty("org.quartz.dataSource.ds.user", user);
        }
        if (password != null && !password.isEmpty()) {
            p.setProperty("org.quartz.dataSource.ds.password", password);
        }
        return p;
    }

    /** Opens (never starts) the scheduler `spec`. */
    public static Scheduler open(Spec spec, String url, String user, String password)
            throws SchedulerException {
        return new StdSchedulerFactory(properties(spec, url, user, password)).getScheduler();
    }
}

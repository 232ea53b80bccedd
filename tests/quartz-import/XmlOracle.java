package qzfixture;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.quartz.Calendar;
import org.quartz.JobDetail;
import org.quartz.JobKey;
import org.quartz.Scheduler;
import org.quartz.Trigger;
import org.quartz.TriggerKey;
import org.quartz.impl.StdSchedulerFactory;
import org.quartz.impl.matchers.GroupMatcher;
import org.quartz.simpl.CascadingClassLoadHelper;
import org.quartz.spi.OperableTrigger;
import org.quartz.xml.XMLSchedulingDataProcessor;

/**
 * Loads a job-scheduling-data XML file into an in-memory Quartz 2.3.2 scheduler (never started)
 * with Quartz's own reader, XMLSchedulingDataProcessor, as the XMLSchedulingDataProcessorPlugin
 * does, and prints JSONL on stdout: {"type":"trigger","group","name","job_group","job_name",
 * "priority","instr","fires":[25 epoch ms]} and {"type":"job","group","name","class","data":{…}}.
 *
 * <p>Run with -Duser.timezone=Europe/Berlin. Argument: the XML file.
 */
public final class XmlOracle {
    static final int FIRES = 25;

    private XmlOracle() {}

    public static void main(String[] args) throws Exception {
        PrintStream out =
                new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        try {
            Properties props = new Properties();
            props.setProperty("org.quartz.scheduler.instanceName", "xmloracle");
            props.setProperty("org.quartz.scheduler.skipUpdateCheck", "true");
            props.setProperty("org.quartz.threadPool.threadCount", "1");
            props.setProperty("org.quartz.jobStore.class", "org.quartz.simpl.RAMJobStore");
            Scheduler s = new StdSchedulerFactory(props).getScheduler();
            CascadingClassLoadHelper loader = new CascadingClassLoadHelper();
            loader.initialize();
            new XMLSchedulingDataProcessor(loader).processFileAndScheduleJobs(args[0], s);
            for (String group : s.getJobGroupNames()) {
                for (JobKey key : s.getJobKeys(GroupMatcher.jobGroupEquals(group))) {
                    JobDetail job = s.getJobDetail(key);
                    StringBuilder sb = new StringBuilder("{\"type\":\"job\"");
                    sb.append(",\"group\":").append(Oracle.str(key.getGroup()));
                    sb.append(",\"name\":").append(Oracle.str(key.getName()));
                    sb.append(",\"class\":").append(Oracle.str(job.getJobClass().getName()));
                    sb.append(",\"data\":{");
                    boolean first = true;
                    for (Map.Entry<String, Object> e : job.getJobDataMap().entrySet()) {
                        if (!first) sb.append(',');
                        first = false;
                        sb.append(Oracle.str(e.getKey())).append(':')
                                .append(Oracle.str(String.valueOf(e.getValue())));
                    }
                    out.println(sb.append("}}"));
                }
            }
            for (String group : s.getTriggerGroupNames()) {
                for (TriggerKey key : s.getTriggerKeys(GroupMatcher.triggerGroupEquals(group))) {
                    Trigger stored = s.getTrigger(key);
                    Calendar cal = stored.getCalendarName() == null
                            ? null : s.getCalendar(stored.getCalendarName());
                    OperableTrigger t = (OperableTrigger) ((OperableTrigger) stored).clone();
                    List<Long> fires = new ArrayList<>();
                    while (fires.size() < FIRES && t.getNextFireTime() != null) {
                        fires.add(t.getNextFireTime().getTime());
                        t.triggered(cal);
                    }
                    StringBuilder sb = new StringBuilder("{\"type\":\"trigger\"");
                    sb.append(",\"group\":").append(Oracle.str(key.getGroup()));
                    sb.append(",\"name\":").append(Oracle.str(key.getName()));
                    sb.append(",\"job_group\":").append(Oracle.str(stored.getJobKey().getGroup()));
                    sb.append(",\"job_name\":").append(Oracle.str(stored.getJobKey().getName()));
                    sb.append(",\"priority\":").append(stored.getPriority());
                    sb.append(",\"instr\":").append(stored.getMisfireInstruction());
                    sb.append(",\"fires\":[");
                    for (int i = 0; i < fires.size(); i++) {
                        if (i > 0) sb.append(',');
                        sb.append(fires.get(i));
                    }
                    out.println(sb.append("]}"));
                }
            }
            out.flush();
        } catch (Throwable t) {
            out.flush();
            t.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }
}

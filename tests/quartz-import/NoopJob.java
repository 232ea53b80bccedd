package qzfixture;

import org.quartz.Job;
import org.quartz.JobExecutionContext;

/** A job that does nothing: the fixture's schedulers never run it. */
public class NoopJob implements Job {
    @Override
    public void execute(JobExecutionContext context) {}
}

package qzfixture;

import org.quartz.DisallowConcurrentExecution;
import org.quartz.Job;
import org.quartz.JobExecutionContext;
import org.quartz.PersistJobDataAfterExecution;

/** A job Quartz stores as non-concurrent and persisting its data (IS_NONCONCURRENT, IS_UPDATE_DATA). */
@DisallowConcurrentExecution
@PersistJobDataAfterExecution
public class NonConcurrentJob implements Job {
    @Override
    public void execute(JobExecutionContext context) {}
}

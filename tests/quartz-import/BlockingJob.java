package qzfixture;

import java.util.concurrent.CountDownLatch;

import org.quartz.DisallowConcurrentExecution;
import org.quartz.Job;
import org.quartz.JobExecutionContext;
import org.quartz.PersistJobDataAfterExecution;

/**
 * A job that signals {@link #STARTED} and then blocks forever: MakeStore halts the JVM while it
 * runs, leaving an EXECUTING fired-trigger row and the job's other triggers blocked.
 */
@DisallowConcurrentExecution
@PersistJobDataAfterExecution
public class BlockingJob implements Job {
    public static final CountDownLatch STARTED = new CountDownLatch(1);
    private static final CountDownLatch NEVER = new CountDownLatch(1);

    @Override
    public void execute(JobExecutionContext context) {
        STARTED.countDown();
        while (true) {
            try {
                NEVER.await();
            } catch (InterruptedException e) {
                // keep blocking: the JVM is halted, never shut down
            }
        }
    }
}

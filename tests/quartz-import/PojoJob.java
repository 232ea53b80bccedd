package qzfixture;

import java.io.Serializable;

import org.quartz.Job;
import org.quartz.JobExecutionContext;

/** A job whose JobDataMap holds a {@link Pojo}: a user class chime cannot read. */
public class PojoJob implements Job {
    /** A user's own serializable class, as found in real job data. */
    public static class Pojo implements Serializable {
        private static final long serialVersionUID = 1L;
        public String label;
        public int count;

        public Pojo(String label, int count) {
            this.label = label;
            this.count = count;
        }
    }

    @Override
    public void execute(JobExecutionContext context) {}
}

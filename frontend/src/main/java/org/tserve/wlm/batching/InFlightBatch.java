package org.tserve.wlm.batching;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.link.BackendLink;

/** A batch written to a backend and not yet answered: its jobs, the link it went out on, its deadline. */
public final class InFlightBatch {
    final long id;
    public final List<Job> jobs;
    final Map<String, Job> byId;
    /** The link it was written to: a timeout kills that link, not a later one. */
    public final BackendLink link;
    final long deadlineNanos;
    public final int timeoutSec;
    /** Time the frontend spent encoding and writing it (WorkerThreadTime metric). */
    volatile long frontendNanos;

    InFlightBatch(long id, List<Job> jobs, BackendLink link, long deadlineNanos, int timeoutSec) {
        this.id = id;
        this.jobs = jobs;
        this.link = link;
        this.deadlineNanos = deadlineNanos;
        this.timeoutSec = timeoutSec;
        this.byId = new HashMap<>(jobs.size() * 2);
        for (Job j : jobs) {
            byId.put(j.getId(), j);
        }
    }
}

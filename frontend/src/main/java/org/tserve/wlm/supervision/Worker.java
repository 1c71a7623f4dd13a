package org.tserve.wlm.supervision;

import java.util.concurrent.BlockingDeque;
import java.util.concurrent.CompletableFuture;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.WorkerDescription;
import org.tserve.wlm.api.WorkerState;
import org.tserve.wlm.link.BackendLink;

/**
 * One worker as the rooms above supervision see it (the registry's model, stateful sequences,
 * describe, health): its state, whether it can take a job now, and what describe shows. Starting,
 * stopping and scaling stay in supervision ({@link WorkerThread}, {@link WorkerScaler}).
 */
public interface Worker {
    /** Its port, as describe shows it. */
    String getId();

    WorkerState getState();

    /** Asked to stop (scaled down or unregistered): it takes no new jobs. */
    boolean isStopping();

    /** Failed and not serving again yet: in restart backoff, or reloading after its first load ended. */
    boolean isDown();

    /** Writes {@code job} from the calling thread when the worker is idle; false (nothing changed) otherwise. */
    boolean dispatchNow(Job job);

    /** Batches it could take now; 0 while it is not serving. */
    int freeBatches();

    /** The backend's PONG json (null when not serving); concurrent callers share one PING. */
    CompletableFuture<String> ping();

    /** The worker as describe shows it, with the PONG it answered (or null). */
    WorkerDescription describe(String pong);

    /** Its own queue: the requests of the stateful sequences pinned to it. */
    BlockingDeque<Job> sequenceQueue();

    /** The link while it serves, else null (a stateful model's SEQUENCE_END goes there). */
    BackendLink servingLink();
}

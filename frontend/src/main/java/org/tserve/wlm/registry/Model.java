package org.tserve.wlm.registry;

import java.util.ArrayList;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.tserve.archive.ModelArchive;
import org.tserve.config.ModelSettings;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.WlmException;
import org.tserve.wlm.sequences.Sequences;
import org.tserve.wlm.supervision.ServedModel;
import org.tserve.wlm.supervision.Worker;


/**
 * One registered model version: what its workers see ({@link ServedModel}: archive, settings, queue,
 * workers) and what the registry adds: when and how it was registered, its stateful sequences,
 * and taking jobs ({@link #enqueue}) until it is closed.
 */
public final class Model extends ServedModel {
    final boolean loadedAtStartup;
    /** When this version was registered (epoch ms; the OpenAI model list's {@code created}). */
    final long registeredAtMillis = System.currentTimeMillis();
    private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
    private boolean closed;
    /** Open sequences of a stateful model (sequenceBatching). */
    public final Sequences sequences = new Sequences(this, System::currentTimeMillis);

    public Model(String name, String version, String handler, String runtime, ModelArchive archive, ModelSettings settings,
          boolean loadedAtStartup) {
        super(name, version, handler, runtime, archive, settings, SettingsResolver.distributed(name, settings, new ArrayList<>()));
        this.loadedAtStartup = loadedAtStartup;
    }

    /** A stateful model's sequences on {@code w} lose their state with its process. */
    @Override
    protected void workerEnded(Worker w, String why) {
        if (getSettings().sequenceBatching) {
            sequences.closeFor(w, why);
        }
    }

    /** Idle or overlong stateful sequences expire. */
    @Override
    protected void sweep() {
        if (getSettings().sequenceBatching) {
            sequences.expire();
        }
    }

    /**
     * Queues a job (or writes it to an idle worker at once, {@link Worker#dispatchNow});
     * 404 once unregistered, 503 with no worker or a full queue.
     */
    public void enqueue(Job job, String noWorkerKind) throws WlmException {
        lock.readLock().lock();
        try {
            if (closed) {
                throw new WlmException(404, "Model not found: " + name);
            }
            if (activeWorkers().isEmpty()) {
                throw new WlmException(503, "Model \"" + name + "\" has no worker to serve " + noWorkerKind
                        + " request. Please use scale workers API to add workers.");
            }
            if (getSettings().sequenceBatching) {
                sequences.submit(job, activeWorkers());   // to its sequence's worker, in order
                return;
            }
            if (getSettings().useJobTicket && job.getKind() == Job.Kind.INFERENCE && !hasFreeWorker()) {
                throw new WlmException(503, "Model \"" + name + "\" version " + version + " has no free worker for this "
                        + "request (useJobTicket: true answers instead of queueing). Retry later, or add workers.");
            }
            if (getSettings().joinsRunningBatch()) {
                job.onCancel(() -> queue.remove(job));
            }
            if (queue.isEmpty() && job.getKind() == Job.Kind.INFERENCE) {
                for (Worker w : workers()) {   // an idle worker takes it from this thread: no hand-off
                    if (w.dispatchNow(job)) {
                        return;
                    }
                }
            }
            if (!queue.offer(job)) {
                throw new WlmException(503, "Model \"" + name + "\" version " + version + " has a full job queue ("
                        + getSettings().jobQueueSize + " requests waiting). Retry later, or raise jobQueueSize or add workers.");
            }
        } finally {
            lock.readLock().unlock();
        }
    }

    /**
     * Whether a worker could take one more request now (useJobTicket): the requests the serving
     * workers' free batch slots hold outnumber those already queued for them.
     */
    private boolean hasFreeWorker() {
        int perBatch = getSettings().joinsRunningBatch() ? 1 : getSettings().batchSize;
        long free = 0;
        for (Worker w : workers()) {
            free += (long) w.freeBatches() * perBatch;
        }
        return queue.size() < free;
    }

    /** Refuses new jobs from now on. */
    void close() {
        lock.writeLock().lock();
        try {
            closed = true;
        } finally {
            lock.writeLock().unlock();
        }
    }
}

package org.tserve.wlm.registry;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingDeque;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.tserve.archive.ModelArchive;
import org.tserve.config.ModelSettings;
import org.tserve.dist.TorchrunOptions;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.WlmException;
import org.tserve.wlm.api.WorkerState;
import org.tserve.wlm.batching.BatchModel;
import org.tserve.wlm.sequences.Sequences;
import org.tserve.wlm.supervision.WorkerThread;

/** One registered model version: its archive, settings, bounded job queue and workers. */
public final class Model implements BatchModel {
    public final String name;
    public final String version;
    public final String handler;
    public final String runtime;
    final boolean loadedAtStartup;
    /** When this version was registered (epoch ms; the OpenAI model list's {@code created}). */
    final long registeredAtMillis = System.currentTimeMillis();
    private final ModelArchive archive;
    private volatile ModelSettings settings;
    public final LinkedBlockingDeque<Job> queue;
    public final List<WorkerThread> workers = new CopyOnWriteArrayList<>();
    private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
    private boolean closed;
    public final AtomicInteger gpuCounter = new AtomicInteger();
    /** The validated parallelType/parallelLevel/torchrun settings (they never change once registered). */
    public final TorchrunOptions dist;
    /** Open sequences of a stateful model (sequenceBatching). */
    public final Sequences sequences = new Sequences(this, System::currentTimeMillis);

    public Model(String name, String version, String handler, String runtime, ModelArchive archive, ModelSettings settings,
          boolean loadedAtStartup) {
        this.name = name;
        this.version = version;
        this.handler = handler;
        this.runtime = runtime;
        this.archive = archive;
        this.settings = settings;
        this.dist = SettingsResolver.distributed(name, settings, new ArrayList<>());
        this.loadedAtStartup = loadedAtStartup;
        this.queue = new LinkedBlockingDeque<>(settings.jobQueueSize);
    }

    /** True for a member node's part of a leader's job (never registered, serves no requests). */
    private volatile boolean memberPart;

    public void markMemberPart() {
        memberPart = true;
    }

    public boolean isMemberPart() {
        return memberPart;
    }

    public ModelArchive getArchive() {
        return archive;
    }

    @Override
    public ModelSettings getSettings() {
        return settings;
    }

    @Override
    public String modelName() {
        return name;
    }

    @Override
    public String modelVersion() {
        return version;
    }

    @Override
    public java.util.concurrent.BlockingDeque<Job> jobQueue() {
        return queue;
    }

    public void setSettings(ModelSettings s) {
        settings = s;
    }

    /**
     * Whether INFERENCE frames (and a stateful model's SEQUENCE_END) go to every rank of a torchrun
     * worker rather than rank 0 alone: a continuous-batching handler's rank 0 feeds the other ranks
     * itself (its steps' commands).
     */
    @Override
    public boolean inferenceToAllRanks() {
        return dist.usesTorchrun() && dist.broadcastsInference() && !settings.joinsRunningBatch();
    }

    /** Workers that are not being stopped (they count for scaling and for accepting jobs). */
    public List<WorkerThread> activeWorkers() {
        List<WorkerThread> out = new ArrayList<>();
        for (WorkerThread w : workers) {
            if (!w.isStopping() && w.getState() != WorkerState.STOPPED) {
                out.add(w);
            }
        }
        return out;
    }

    /**
     * Queues a job (or writes it to an idle worker at once, {@link WorkerThread#dispatchNow});
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
            if (settings.sequenceBatching) {
                sequences.submit(job, activeWorkers());   // to its sequence's worker, in order
                return;
            }
            if (settings.useJobTicket && job.getKind() == Job.Kind.INFERENCE && !hasFreeWorker()) {
                throw new WlmException(503, "Model \"" + name + "\" version " + version + " has no free worker for this "
                        + "request (useJobTicket: true answers instead of queueing). Retry later, or add workers.");
            }
            if (settings.joinsRunningBatch()) {
                job.onCancel(() -> queue.remove(job));
            }
            if (queue.isEmpty() && job.getKind() == Job.Kind.INFERENCE) {
                for (WorkerThread w : workers) {   // an idle worker takes it from this thread: no hand-off
                    if (w.dispatchNow(job)) {
                        return;
                    }
                }
            }
            if (!queue.offer(job)) {
                throw new WlmException(503, "Model \"" + name + "\" version " + version + " has a full job queue ("
                        + settings.jobQueueSize + " requests waiting). Retry later, or raise jobQueueSize or add workers.");
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
        int perBatch = settings.joinsRunningBatch() ? 1 : settings.batchSize;
        long free = 0;
        for (WorkerThread w : workers) {
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

    /** Answers every queued job with an error (unregister, scale to zero, shutdown). */
    public int failQueued(int status, String message) {
        int n = 0;
        Job j;
        while ((j = queue.poll()) != null) {
            if (j.fail(status, message)) {
                n++;
            }
        }
        return n;
    }
}

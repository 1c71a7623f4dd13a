package org.tserve.wlm.supervision;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.BlockingDeque;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingDeque;
import java.util.concurrent.atomic.AtomicInteger;
import org.tserve.archive.ModelArchive;
import org.tserve.config.ModelSettings;
import org.tserve.dist.TorchrunOptions;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.WorkerState;
import org.tserve.wlm.batching.BatchModel;

/**
 * A model version as its workers see it: who it is (name, version, handler, archive, torchrun
 * options), its settings, its job queue and the workers that serve it. The registry's {@code Model}
 * extends it with what only the registry needs (registration, stateful sequences, closing); a
 * worker tells it about itself only through {@link #workerEnded} and {@link #sweep}.
 */
public abstract class ServedModel implements BatchModel {
    public final String name;
    public final String version;
    public final String handler;
    public final String runtime;
    /** The validated parallelType/parallelLevel/torchrun settings (they never change once registered). */
    public final TorchrunOptions dist;
    public final LinkedBlockingDeque<Job> queue;
    private final ModelArchive archive;
    private volatile ModelSettings settings;
    /** Its workers, started and not yet stopped for good (the scaler adds them, a stopped one leaves). */
    final List<WorkerThread> workers = new CopyOnWriteArrayList<>();
    /** Round robin over the GPUs for plain workers. */
    final AtomicInteger gpuCounter = new AtomicInteger();
    /** True for a member node's part of a leader's job (never registered, serves no requests). */
    private volatile boolean memberPart;
    /**
     * Out of the registry for good (unregistered, failed registration, shutdown) and its workers
     * told to stop: no worker may be added after that. Guarded by this model's lock, which the
     * scaler holds while it adds workers ({@link WorkerScaler#addWorkers}, {@link WorkerScaler#stopAll}).
     */
    boolean retired;

    protected ServedModel(String name, String version, String handler, String runtime, ModelArchive archive,
                          ModelSettings settings, TorchrunOptions dist) {
        this.name = name;
        this.version = version;
        this.handler = handler;
        this.runtime = runtime;
        this.archive = archive;
        this.settings = settings;
        this.dist = dist;
        this.queue = new LinkedBlockingDeque<>(settings.jobQueueSize);
    }

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

    public void setSettings(ModelSettings s) {
        settings = s;
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
    public BlockingDeque<Job> jobQueue() {
        return queue;
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

    /** Every worker of this version, stopping ones included (describe). */
    public List<Worker> workers() {
        return Collections.unmodifiableList(workers);
    }

    /** Workers that are not being stopped (they count for scaling and for accepting jobs). */
    public List<Worker> activeWorkers() {
        return Collections.unmodifiableList(active());
    }

    List<WorkerThread> active() {
        List<WorkerThread> out = new ArrayList<>();
        for (WorkerThread w : workers) {
            if (!w.isStopping() && w.getState() != WorkerState.STOPPED) {
                out.add(w);
            }
        }
        return out;
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

    /** A worker's process ended ({@code why}: its failure, or "stopped"): state it held for clients is gone. */
    protected void workerEnded(Worker w, String why) {
    }

    /** Called with every response-timeout sweep of each worker (idle stateful sequences expire). */
    protected void sweep() {
    }
}

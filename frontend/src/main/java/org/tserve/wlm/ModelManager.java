package org.tserve.wlm;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import org.tserve.config.ConfigManager;
import org.tserve.config.ModelSettings;
import org.tserve.config.ModelSnapshot;
import org.tserve.dist.DeviceAllocator;
import org.tserve.dist.PortBlockAllocator;
import org.tserve.wlm.api.ClusterMember;
import org.tserve.wlm.api.Health;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.ModelDescription;
import org.tserve.wlm.api.ModelList;
import org.tserve.wlm.api.ModelSummary;
import org.tserve.wlm.api.RegisterRequest;
import org.tserve.wlm.api.StatusResult;
import org.tserve.wlm.api.WlmException;
import org.tserve.wlm.api.WlmListener;
import org.tserve.wlm.api.WorkerState;
import org.tserve.wlm.multinode.MemberJobs;
import org.tserve.wlm.registry.Model;
import org.tserve.wlm.registry.ModelDescriber;
import org.tserve.wlm.registry.ModelRegistrar;
import org.tserve.wlm.registry.ModelRegistry;
import org.tserve.wlm.supervision.Worker;
import org.tserve.wlm.supervision.WorkerContext;
import org.tserve.wlm.supervision.WorkerEnvironment;
import org.tserve.wlm.supervision.WorkerScaler;

/**
 * The models of a server: register, scale, unregister, describe, list, set-default and job
 * submission. Thread-safe; management calls may block (synchronous registration and scaling).
 * A facade: {@link ModelRegistry} holds the versions, {@link ModelRegistrar} brings them in and
 * out, {@link WorkerScaler} runs their workers, {@link ModelDescriber} answers describe and list.
 */
public final class ModelManager {
    private final ScheduledThreadPoolExecutor scheduler;
    private final WlmListeners listeners = new WlmListeners();
    private final ModelRegistry registry = new ModelRegistry();
    private final WorkerScaler scaler;
    private volatile boolean loadingStartupModels;
    /** Startup models were asked for and none of them loaded: not ready until a model is registered. */
    private volatile boolean startupModelsFailed;
    /** Told after every successful register, scale, unregister and set-default (config snapshots). */
    private volatile Runnable changeListener = () -> { };
    private final ModelRegistrar registrar;
    private final ModelDescriber describer;
    private final MemberJobs memberJobs;
    private volatile boolean shuttingDown;

    /**
     * @param tmpRoot where archives are extracted ({@code <tmpRoot>/models/<uuid>/}), normally java.io.tmpdir
     */
    public ModelManager(ConfigManager cfg, WorkerEnvironment env, Path tmpRoot) {
        this.scheduler = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, "wlm-timer");
            t.setDaemon(true);
            return t;
        });
        this.scheduler.setRemoveOnCancelPolicy(true);
        WorkerContext workers = new WorkerContext(env, scheduler, cfg.getInt("max_response_size"), listeners);
        this.scaler = new WorkerScaler(workers, cfg, new DeviceAllocator(cfg.getNumberOfGpu()),
                new PortBlockAllocator(cfg.getInt("initial_distribution_port")));
        this.registrar = new ModelRegistrar(cfg, env, tmpRoot, registry, scaler);
        this.describer = new ModelDescriber(registry);
        this.memberJobs = new MemberJobs(cfg, tmpRoot, scaler);
    }

    /** This node's parts of a leader's jobs across machines (the member's /cluster API). */
    public ClusterMember memberJobs() {
        return memberJobs;
    }

    /** Registers an observer (metrics). */
    public void addListener(WlmListener l) {
        listeners.add(l);
    }

    /**
     * Registers a model version and starts its minimum workers.
     *
     * @return 200 when registered (and, if synchronous, its workers loaded), 202 when workers
     *     are still starting
     * @throws WlmException 400 bad archive/parameters, 404 archive not found, 409 version already
     *     registered, 500/507 workers failed to load (the model is then unregistered again),
     *     503 shutting down
     */
    public StatusResult register(RegisterRequest req) throws WlmException {
        if (shuttingDown) {
            throw new WlmException(503, "Server is shutting down");
        }
        StatusResult r = registrar.register(req);
        if (!req.loadedAtStartup) {
            changeListener.run();
        }
        return r;
    }

    /**
     * Scales a model version to at least {@code min} and at most {@code max} workers. Removed
     * workers finish their in-flight batches first; queued jobs stay queued for the others
     * (they are answered with 503 when the model is scaled to zero).
     *
     * @param version null for the default version
     */
    public StatusResult scale(String name, String version, int min, int max, boolean synchronous) throws WlmException {
        WorkerScaler.checkRange(min, max);
        StatusResult r = scaler.scale(registry.find(name, version), version != null, min, max, synchronous);
        changeListener.run();
        return r;
    }

    /**
     * Unregisters a model version (null = the default one). Queued jobs are answered with 503,
     * in-flight batches finish, then workers stop and the extracted archive is deleted.
     *
     * @throws WlmException 404 unknown, 403 when removing the default version while others exist
     */
    public StatusResult unregister(String name, String version) throws WlmException {
        StatusResult r = registrar.unregister(name, version);
        changeListener.run();
        return r;
    }

    /** Makes {@code version} the default version of {@code name}. */
    public StatusResult setDefault(String name, String version) throws WlmException {
        registry.setDefault(name, version);
        changeListener.run();
        return new StatusResult(200, "Default version successfully updated for model \"" + name + "\" to \"" + version + "\"");
    }

    /**
     * Describes a model: {@code version} null = the default version, {@code "all"} = every
     * version, else that version.
     */
    public List<ModelDescription> describe(String name, String version) throws WlmException {
        return describer.describe(name, version);
    }

    /** A version of the model (null = its default version) has a READY worker (readiness probes); unknown: 404. */
    public boolean hasReadyWorker(String name, String version) throws WlmException {
        for (ModelDescription d : describer.describe(name, version)) {
            if (d.workers().stream().anyMatch(w -> w.state() == WorkerState.READY)) {
                return true;
            }
        }
        return false;
    }

    /**
     * One page of the model list (default versions, sorted by name). {@code limit} outside
     * 0..100 means 100; a negative page token means 0.
     */
    public ModelList list(int limit, int pageToken) {
        return describer.list(limit, pageToken);
    }

    /** The default version of every model, sorted by name, with when it was registered. */
    public List<ModelSummary> summaries() {
        return describer.summaries();
    }

    /** One version of a model (null = the default one) with when it was registered; 404 when unknown. */
    public ModelSummary summary(String name, String version) throws WlmException {
        return describer.summary(name, version);
    }

    /** Names of all registered models (sorted). */
    public List<String> modelNames() {
        return registry.names();
    }

    /**
     * Queues a job for its model version.
     *
     * An inference job of a model version that exists is reported to the listeners
     * ({@link WlmListener#onInferenceSubmitted}) whether it was queued or refused (503); a name or
     * version no model has (404) is not, so clients cannot grow the metrics with names of their choosing.
     *
     * @throws WlmException 404 unknown model or version, 503 no worker or queue full
     */
    public void submit(Job job) throws WlmException {
        if (shuttingDown) {
            throw new WlmException(503, "Server is shutting down");
        }
        Model m = find(job.getModelName(), job.getVersion());
        boolean inference = job.getKind() == Job.Kind.INFERENCE;
        try {
            m.enqueue(job, inference ? "inference" : "describe");
        } catch (WlmException e) {
            if (inference && e.getStatus() != 400) {   // a refused request counts, a malformed one does not
                listeners.onInferenceSubmitted(job.getModelName(), job.getVersion());
            }
            throw e;
        }
        if (inference) {
            listeners.onInferenceSubmitted(job.getModelName(), job.getVersion());
        }
    }

    /** A registered version (null = the default one); 404 when unknown. For {@link #submit} and wlm's tests, not the front ends. */
    public Model find(String name, String version) throws WlmException {
        return registry.find(name, version);
    }

    /** Marks the startup models as loading (the server answers requests meanwhile, but is not ready). */
    public void setLoadingStartupModels(boolean loading) {
        loadingStartupModels = loading;
    }

    /** Marks that startup models were asked for and none loaded (see {@link #health}). */
    public void setStartupModelsFailed(boolean failed) {
        startupModelsFailed = failed;
    }

    /** Runs {@code listener} after every successful management change; it must return quickly. */
    public void onChange(Runnable listener) {
        changeListener = listener;
    }

    /** The registered versions, their default versions and scale, as a config snapshot records them. */
    public ModelSnapshot snapshot() {
        List<ModelSnapshot.Version> out = new ArrayList<>();
        for (String name : registry.names()) {
            List<ModelDescription> ds;
            try {
                ds = describer.describe(name, "all");
            } catch (WlmException e) {
                continue;   // unregistered meanwhile
            }
            for (ModelDescription d : ds) {
                ModelSettings s = d.settings();
                out.add(new ModelSnapshot.Version(name, d.modelVersion(), d.isDefault(), d.modelUrl(), s.minWorkers,
                        s.maxWorkers, s.batchSize, s.maxBatchDelay, s.responseTimeout, s.startupTimeout, d.runtime()));
            }
        }
        return new ModelSnapshot("", out);
    }

    /**
     * UNHEALTHY while the startup models load, after all of them failed (until a model is registered), or when a model's default version with minWorkers
     * above 0 has no READY worker because its workers failed (restart backoff, reloading, given
     * up); PARTIAL when one has fewer READY workers than minWorkers (also while a newly added
     * worker loads for the first time); else HEALTHY.
     */
    public Health health() {
        if (loadingStartupModels || (startupModelsFailed && registry.names().isEmpty())) {
            return Health.UNHEALTHY;
        }
        Health h = Health.HEALTHY;
        for (Model m : registry.defaults()) {
            int min = m.getSettings().minWorkers;
            List<Worker> active = m.activeWorkers();
            long ready = active.stream().filter(w -> w.getState() == WorkerState.READY).count();
            if (min > 0 && ready == 0 && (active.isEmpty() || active.stream().anyMatch(Worker::isDown))) {
                return Health.UNHEALTHY;
            }
            if (ready < min) {
                h = Health.PARTIAL;
            }
        }
        return h;
    }

    /** Stops everything: queued jobs get 503, in-flight batches finish (bounded), workers exit. */
    public void shutdown() {
        shuttingDown = true;
        registrar.unregisterAll();
        memberJobs.stopAll();
        scheduler.shutdownNow();
    }
}

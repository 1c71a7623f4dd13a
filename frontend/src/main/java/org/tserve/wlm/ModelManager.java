package org.tserve.wlm;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Logger;
import java.util.regex.Pattern;
import org.tserve.archive.ArchiveException;
import org.tserve.archive.DependencyInstaller;
import org.tserve.archive.Manifest;
import org.tserve.archive.ModelArchive;
import org.tserve.archive.ModelLocator;
import org.tserve.config.ConfigException;
import org.tserve.config.ConfigManager;
import org.tserve.config.ModelSettings;
import org.tserve.dist.DeviceAllocator;
import org.tserve.dist.DeviceReservation;
import org.tserve.dist.InsufficientDevicesException;
import org.tserve.dist.PortBlockAllocator;
import org.tserve.dist.TorchrunOptions;

/**
 * The models of a server: register, scale, unregister, describe, list, set-default and job
 * submission. Thread-safe; management calls may block (synchronous registration and scaling).
 */
public final class ModelManager {
    private static final Logger LOG = Logger.getLogger(ModelManager.class.getName());
    private static final Pattern NAME = Pattern.compile("^[A-Za-z0-9][A-Za-z0-9_\\-.]*$");
    /** How long describe waits for the workers' PONGs (stages) before showing a worker without them. */
    private static final long PONG_WAIT_MS = 2000;

    private final ConfigManager cfg;
    private final WorkerEnvironment env;
    private final Path tmpRoot;
    private final ModelLocator locator;
    private final Map<String, Versions> models = new ConcurrentHashMap<>();
    private final Object registry = new Object();
    private final AtomicInteger nextPort;
    /** The server's accelerators: each distributed worker holds parallelLevel of them. */
    private final DeviceAllocator devices;
    /** Rank sockets and rendezvous port of torchrun workers, from initial_distribution_port. */
    private final PortBlockAllocator distPorts;
    private final ScheduledThreadPoolExecutor scheduler;
    private final List<WlmListener> listeners = new CopyOnWriteArrayList<>();
    private volatile boolean shuttingDown;

    /** The versions of one model name and which one is the default. */
    private static final class Versions {
        final Map<String, Model> byVersion = new LinkedHashMap<>();
        String defaultVersion;
    }

    /**
     * @param tmpRoot where archives are extracted ({@code <tmpRoot>/models/<uuid>/}), normally java.io.tmpdir
     */
    public ModelManager(ConfigManager cfg, WorkerEnvironment env, Path tmpRoot) {
        this.cfg = cfg;
        this.env = env;
        this.tmpRoot = tmpRoot;
        this.locator = new ModelLocator(cfg.getModelStore(), cfg.allowedUrls(), cfg.getLong("max_download_size"));
        this.nextPort = new AtomicInteger(cfg.getInt("initial_worker_port"));
        this.devices = new DeviceAllocator(cfg.getNumberOfGpu());
        this.distPorts = new PortBlockAllocator(cfg.getInt("initial_distribution_port"));
        this.scheduler = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, "wlm-timer");
            t.setDaemon(true);
            return t;
        });
        this.scheduler.setRemoveOnCancelPolicy(true);
    }

    /** Registers an observer (metrics). */
    public void addListener(WlmListener l) {
        listeners.add(l);
    }

    // ---- register ----

    /**
     * Registers a model version and starts its minimum workers.
     *
     * @return 200 when registered (and, if synchronous, its workers loaded), 202 when workers
     *     are still starting
     * @throws WlmException 400 bad archive/parameters, 404 archive not found, 409 version already
     *     registered, 500/507 workers failed to load (the model is then unregistered again)
     */
    public StatusResult register(RegisterRequest req) throws WlmException {
        if (shuttingDown) {
            throw new WlmException(503, "Server is shutting down");
        }
        ModelArchive archive;
        try {
            ModelLocator.Located loc = locator.locate(req.url);
            archive = ModelArchive.open(loc.path, tmpRoot, req.url, loc.downloaded);
        } catch (ArchiveException e) {
            throw new WlmException(e.getStatus(), e.getMessage());
        }
        Model model;
        try {
            model = createModel(req, archive);
        } catch (WlmException | RuntimeException e) {
            archive.delete();
            throw e;
        }
        try {
            if (cfg.getBool("install_py_dep_per_model") && archive.getManifest().requirementsFile != null) {
                LOG.info("Installing Python dependencies of model " + model.name + " from " + archive.getManifest().requirementsFile);
                DependencyInstaller.install(env.python, model.name, archive);
            }
        } catch (ArchiveException e) {
            removeModel(model, "registration failed");
            throw new WlmException(e.getStatus(), e.getMessage());
        }
        int n = model.getSettings().minWorkers;
        List<WorkerThread> started;
        try {
            started = addWorkers(model, n);
        } catch (WlmException e) {
            removeModel(model, "registration failed");
            throw e;
        }
        LOG.info("Model " + model.name + " version " + model.version + " registered with " + n + " initial workers");
        if (n == 0) {
            return new StatusResult(200, "Model \"" + model.name + "\" Version: " + model.version
                    + " registered with 0 initial workers. Use scale workers API to add workers for the model.");
        }
        if (!req.synchronous) {
            return new StatusResult(202, "Processing worker updates...");
        }
        try {
            awaitLoaded(started, model.getSettings());
        } catch (WlmException e) {
            removeModel(model, "its workers failed to load");
            throw new WlmException(e.getStatus(), "Failed to start workers for model " + model.name + " version: "
                    + model.version + ": " + e.getMessage());
        }
        return new StatusResult(200, "Model \"" + model.name + "\" Version: " + model.version + " registered with " + n
                + " initial workers");
    }

    private Model createModel(RegisterRequest req, ModelArchive archive) throws WlmException {
        Manifest m = archive.getManifest();
        String name = nonEmpty(req.modelName) ? req.modelName : m.modelName;
        if (!nonEmpty(name)) {
            String file = Path.of(req.url).getFileName().toString();
            name = file.replaceAll("(\\.tar\\.gz|\\.tgz|\\.mar|\\.zip)$", "");
        }
        if (!NAME.matcher(name).matches()) {
            throw new WlmException(400, "Invalid model name '" + name + "': use letters, digits, '_', '-' and '.', "
                    + "starting with a letter or digit");
        }
        String version = nonEmpty(m.modelVersion) ? m.modelVersion : "1.0";
        String runtime = nonEmpty(req.runtime) ? req.runtime : m.runtime;
        if (!runtime.equals("python") && !runtime.equals("python3") && !runtime.equals("LSP")) {
            throw new WlmException(400, "Invalid RuntimeType value: " + runtime + " (use python or python3)");
        }
        String handler = nonEmpty(req.handler) ? req.handler : m.handler;
        if (!nonEmpty(handler)) {
            handler = cfg.get("default_service_handler");
        }
        if (!nonEmpty(handler)) {
            throw new WlmException(400, "Model " + name + " has no handler: set one in the archive (--handler) or with "
                    + "the handler parameter");
        }
        int defaultWorkers = cfg.getInt("default_workers_per_model");
        if (req.loadedAtStartup && defaultWorkers == 0) {
            defaultWorkers = cfg.getNumberOfGpu() > 0 ? cfg.getNumberOfGpu() : Runtime.getRuntime().availableProcessors();
        }
        List<String> warnings = new ArrayList<>();
        ModelSettings settings;
        try {
            settings = SettingsResolver.resolve(cfg, name, version, archive.getYamlConfig(), req, defaultWorkers, warnings);
        } catch (ConfigException e) {
            throw new WlmException(400, e.getMessage());
        }
        for (String w : warnings) {
            LOG.warning("Model " + name + ": " + w);
        }
        Model model = new Model(name, version, handler, runtime, archive, settings, req.loadedAtStartup);
        synchronized (registry) {
            Versions v = models.computeIfAbsent(name, k -> new Versions());
            if (v.byVersion.containsKey(version)) {
                if (v.byVersion.isEmpty()) {
                    models.remove(name);
                }
                throw new WlmException(409, "Model version " + version + " is already registered for model " + name);
            }
            v.byVersion.put(version, model);
            if (v.defaultVersion == null) {
                v.defaultVersion = version;
            }
        }
        return model;
    }

    private static boolean nonEmpty(String s) {
        return s != null && !s.isEmpty();
    }

    /**
     * Starts {@code n} workers, or none: every worker's ports and devices are reserved first, and
     * a request that does not fit is refused (507, naming how many devices are needed and free).
     */
    private List<WorkerThread> addWorkers(Model model, int n) throws WlmException {
        ModelSettings s = model.getSettings();
        TorchrunOptions d = model.dist;
        List<WorkerThread> out = new ArrayList<>();
        try {
            for (int i = 0; i < n; i++) {
                out.add(newWorker(model, s, d, i, n));
            }
        } catch (WlmException e) {
            out.forEach(this::releaseResources);
            throw e;
        }
        for (WorkerThread w : out) {
            model.workers.add(w);
            w.start();
        }
        return out;
    }

    private WorkerThread newWorker(Model model, ModelSettings s, TorchrunOptions d, int i, int n) throws WlmException {
        int port;
        int rdzv = 0;
        if (d.usesTorchrun()) {
            try {
                // ranks listen on port + local rank; the rendezvous takes the port after them
                port = distPorts.take(d.ranks() + 1);
            } catch (IllegalStateException e) {
                throw new WlmException(503, "Model " + model.name + ": " + e.getMessage());
            }
            rdzv = port + d.ranks();
        } else {
            port = nextPort.getAndIncrement();
        }
        if (!d.isParallel()) {
            return new WorkerThread(this, model, port, gpuFor(model, s), null, 0);
        }
        DeviceReservation held = null;
        if ("gpu".equals(s.deviceType) && devices.total() > 0) {
            try {
                held = devices.reserve(WorkerThread.name(port, model), d.parallelLevel, s.deviceIds);
            } catch (InsufficientDevicesException e) {
                if (rdzv > 0) {
                    distPorts.release(port, d.ranks() + 1);
                }
                throw new WlmException(507, "Cannot start worker " + (i + 1) + " of " + n + " for model " + model.name
                        + " (parallelLevel " + d.parallelLevel + "): " + e.getMessage());
            }
        }
        // gpuId 0: the first of the worker's own CUDA_VISIBLE_DEVICES (ranks use LOCAL_RANK)
        return new WorkerThread(this, model, port, held == null ? -1 : 0, held, rdzv);
    }

    /** Gives a stopped worker's devices and ports back. */
    private void releaseResources(WorkerThread w) {
        devices.release(w.getDevices());
        if (w.getRdzvPort() > 0) {
            int port = Integer.parseInt(w.getId());
            distPorts.release(port, w.getRdzvPort() - port + 1);
        }
    }

    private int gpuFor(Model model, ModelSettings s) {
        int gpus = cfg.getNumberOfGpu();
        if (!"gpu".equals(s.deviceType) || gpus == 0) {
            return -1;
        }
        int i = model.gpuCounter.getAndIncrement();
        return s.deviceIds.isEmpty() ? i % gpus : s.deviceIds.get(i % s.deviceIds.size());
    }

    private void awaitLoaded(List<WorkerThread> workers, ModelSettings s) throws WlmException {
        long deadline = System.currentTimeMillis() + s.startupTimeout * 1000L + 30000L;
        for (WorkerThread w : workers) {
            try {
                w.firstLoad().get(Math.max(1, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
            } catch (ExecutionException e) {
                if (e.getCause() instanceof WlmException) {
                    throw (WlmException) e.getCause();
                }
                throw new WlmException(500, String.valueOf(e.getCause()));
            } catch (TimeoutException e) {
                throw new WlmException(500, "workers did not load within startupTimeout " + s.startupTimeout + " s");
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new WlmException(500, "interrupted while waiting for workers");
            }
        }
    }

    // ---- scale ----

    /**
     * Scales a model version to at least {@code min} and at most {@code max} workers. Removed
     * workers finish their in-flight batches first; queued jobs stay queued for the others
     * (they are answered with 503 when the model is scaled to zero).
     *
     * @param version null for the default version
     */
    public StatusResult scale(String name, String version, int min, int max, boolean synchronous) throws WlmException {
        if (min < 0 || max < 0) {
            throw new WlmException(400, "min_worker and max_worker must not be negative");
        }
        if (max < min) {
            throw new WlmException(400, "max_worker cannot be less than min_worker.");
        }
        Model model = find(name, version);
        List<WorkerThread> added;
        List<WorkerThread> removed = new ArrayList<>();
        synchronized (model) {
            ModelSettings before = model.getSettings();
            ModelSettings s = before.copy();
            s.minWorkers = min;
            s.maxWorkers = max;
            model.setSettings(s);
            List<WorkerThread> active = model.activeWorkers();
            try {
                added = active.size() < min ? addWorkers(model, min - active.size()) : List.of();
            } catch (WlmException e) {
                model.setSettings(before);   // refused: nothing changed
                throw e;
            }
            for (int i = active.size() - 1; i >= max; i--) {
                WorkerThread w = active.get(i);
                w.stop();
                removed.add(w);
            }
        }
        String versionText = version == null ? "" : ", version: " + model.version;
        if (!synchronous) {
            if (!removed.isEmpty()) {
                CompletableFuture.runAsync(() -> awaitStopped(model, removed));
            }
            return new StatusResult(202, "Processing worker updates...");
        }
        awaitStopped(model, removed);
        try {
            awaitLoaded(added, model.getSettings());
        } catch (WlmException e) {
            throw new WlmException(e.getStatus(), "Failed to start workers for model " + model.name + " version: "
                    + model.version + ": " + e.getMessage());
        }
        return new StatusResult(200, "Workers scaled to " + model.activeWorkers().size() + " for model: " + model.name
                + versionText);
    }

    private void awaitStopped(Model model, List<WorkerThread> workers) {
        long timeout = cfg.getInt("unregister_model_timeout") * 1000L;
        long deadline = System.currentTimeMillis() + timeout;
        for (WorkerThread w : workers) {
            try {
                w.stoppedFuture().get(Math.max(1, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
            } catch (TimeoutException | ExecutionException e) {
                LOG.warning("Worker " + w.getId() + " of model " + model.name + " did not stop in time; killing it");
                w.killNow();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                w.killNow();
            }
        }
        if (model.activeWorkers().isEmpty() && model.getSettings().minWorkers == 0) {
            int n = model.failQueued(503, "Model \"" + model.name + "\" was scaled to 0 workers before this request was "
                    + "served. Please use scale workers API to add workers.");
            if (n > 0) {
                LOG.info("Answered " + n + " queued requests of model " + model.name + " with 503 (scaled to zero)");
            }
        }
    }

    /** Called by a worker thread when it has stopped for good. */
    void workerStopped(Model model, WorkerThread w) {
        model.workers.remove(w);
        releaseResources(w);
        if (model.activeWorkers().isEmpty() && !model.queue.isEmpty() && w.getState() == WorkerState.STOPPED
                && !w.isStopping()) {
            model.failQueued(503, "Model \"" + model.name + "\" has no worker left (workers failed to recover)");
        }
    }

    // ---- unregister / default ----

    /**
     * Unregisters a model version (null = the default one). Queued jobs are answered with 503,
     * in-flight batches finish, then workers stop and the extracted archive is deleted.
     *
     * @throws WlmException 404 unknown, 403 when removing the default version while others exist
     */
    public StatusResult unregister(String name, String version) throws WlmException {
        Model model;
        synchronized (registry) {
            Versions v = models.get(name);
            if (v == null) {
                throw new WlmException(404, "Model not found: " + name);
            }
            String ver = version == null ? v.defaultVersion : version;
            model = v.byVersion.get(ver);
            if (model == null) {
                throw new WlmException(404, "Model version: " + version + " does not exist for model: " + name);
            }
            if (ver.equals(v.defaultVersion) && v.byVersion.size() > 1) {
                throw new WlmException(403, "Cannot remove default version for model " + name
                        + "; set another default version first (PUT /models/" + name + "/{version}/set-default)");
            }
            v.byVersion.remove(ver);
            if (v.byVersion.isEmpty()) {
                models.remove(name);
            }
        }
        stopModel(model, "Model \"" + name + "\" version " + model.version
                + " was unregistered before this request was served.");
        LOG.info("Model " + name + " version " + model.version + " unregistered");
        return new StatusResult(200, "Model \"" + name + "\" unregistered");
    }

    private void removeModel(Model model, String why) {
        synchronized (registry) {
            Versions v = models.get(model.name);
            if (v != null && v.byVersion.get(model.version) == model) {
                v.byVersion.remove(model.version);
                if (model.version.equals(v.defaultVersion)) {
                    v.defaultVersion = v.byVersion.isEmpty() ? null : v.byVersion.keySet().iterator().next();
                }
                if (v.byVersion.isEmpty()) {
                    models.remove(model.name);
                }
            }
        }
        stopModel(model, "Model \"" + model.name + "\" was removed because " + why + ".");
    }

    private void stopModel(Model model, String queuedMessage) {
        model.close();
        int n = model.failQueued(503, queuedMessage);
        if (n > 0) {
            LOG.info("Answered " + n + " queued requests of model " + model.name + " with 503");
        }
        List<WorkerThread> ws = new ArrayList<>(model.workers);
        for (WorkerThread w : ws) {
            w.stop();
        }
        awaitStopped(model, ws);
        model.failQueued(503, queuedMessage);
        model.getArchive().delete();
    }

    /** Makes {@code version} the default version of {@code name}. */
    public StatusResult setDefault(String name, String version) throws WlmException {
        synchronized (registry) {
            Versions v = models.get(name);
            if (v == null) {
                throw new WlmException(404, "Model not found: " + name);
            }
            if (!v.byVersion.containsKey(version)) {
                throw new WlmException(404, "Model version: " + version + " does not exist for model: " + name);
            }
            v.defaultVersion = version;
        }
        return new StatusResult(200, "Default version successfully updated for model \"" + name + "\" to \"" + version + "\"");
    }

    // ---- describe / list ----

    /**
     * Describes a model: {@code version} null = the default version, {@code "all"} = every
     * version, else that version.
     */
    public List<ModelDescription> describe(String name, String version) throws WlmException {
        List<Model> ms = new ArrayList<>();
        String def;
        synchronized (registry) {
            Versions v = models.get(name);
            if (v == null) {
                throw new WlmException(404, "Model not found: " + name);
            }
            def = v.defaultVersion;
            if ("all".equals(version)) {
                ms.addAll(v.byVersion.values());
            } else {
                Model m = v.byVersion.get(version == null ? def : version);
                if (m == null) {
                    throw new WlmException(404, "Model version: " + version + " does not exist for model: " + name);
                }
                ms.add(m);
            }
        }
        List<ModelDescription> out = new ArrayList<>();
        // PING every worker first, then collect: the PONGs carry the pipeline stages (one wait in all)
        Map<WorkerThread, CompletableFuture<String>> pongs = new LinkedHashMap<>();
        for (Model m : ms) {
            for (WorkerThread w : m.workers) {
                pongs.put(w, w.ping());
            }
        }
        long pongDeadline = System.currentTimeMillis() + PONG_WAIT_MS;
        for (Model m : ms) {
            List<WorkerDescription> ws = new ArrayList<>();
            for (WorkerThread w : m.workers) {
                ws.add(new WorkerDescription(w.getId(), w.getStartTime(), w.getState(), w.getMemoryUsage(), w.getPid(),
                        w.getGpuId() >= 0, w.getGpuId(), w.getRanks(), awaitPong(pongs.get(w), pongDeadline)));
            }
            out.add(new ModelDescription(m.name, m.version, m.getArchive().getUrl(), m.runtime, m.version.equals(def),
                    m.getSettings().copy(), m.loadedAtStartup, ws, m.queue.remainingCapacity(), m.queue.size()));
        }
        return out;
    }

    /** The PONG json, or null when the worker is not serving or did not answer by {@code deadline}. */
    private static String awaitPong(CompletableFuture<String> pong, long deadline) {
        if (pong == null) {
            return null;
        }
        try {
            return pong.get(Math.max(1, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
        } catch (TimeoutException | ExecutionException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    /**
     * One page of the model list (default versions, sorted by name). {@code limit} outside
     * 0..100 means 100; a negative page token means 0.
     */
    public ModelList list(int limit, int pageToken) {
        int lim = limit < 0 || limit > 100 ? 100 : limit;
        int start = Math.max(0, pageToken);
        TreeMap<String, String> sorted = new TreeMap<>();
        synchronized (registry) {
            for (Map.Entry<String, Versions> e : models.entrySet()) {
                Model m = e.getValue().byVersion.get(e.getValue().defaultVersion);
                if (m != null) {
                    sorted.put(e.getKey(), m.getArchive().getUrl());
                }
            }
        }
        List<ModelList.Entry> all = new ArrayList<>();
        sorted.forEach((k, u) -> all.add(new ModelList.Entry(k, u)));
        int end = Math.min(all.size(), start + lim);
        List<ModelList.Entry> page = start >= all.size() ? List.of() : all.subList(start, end);
        String next = end < all.size() ? String.valueOf(end) : null;
        return new ModelList(Collections.unmodifiableList(new ArrayList<>(page)), next);
    }

    /** Names of all registered models (sorted). */
    public List<String> modelNames() {
        return new ArrayList<>(new TreeMap<>(models).keySet());
    }

    // ---- jobs ----

    /**
     * Queues a job for its model version.
     *
     * @throws WlmException 404 unknown model or version, 503 no worker or queue full
     */
    public void submit(Job job) throws WlmException {
        if (shuttingDown) {
            throw new WlmException(503, "Server is shutting down");
        }
        Model m = find(job.getModelName(), job.getVersion());
        m.enqueue(job, job.getKind() == Job.Kind.DESCRIBE ? "describe" : "inference");
    }

    Model find(String name, String version) throws WlmException {
        synchronized (registry) {
            Versions v = models.get(name);
            if (v == null) {
                throw new WlmException(404, "Model not found: " + name);
            }
            Model m = v.byVersion.get(version == null ? v.defaultVersion : version);
            if (m == null) {
                throw new WlmException(404, "Model version: " + version + " does not exist for model: " + name);
            }
            return m;
        }
    }

    /** Healthy when every model's default version has at least minWorkers workers that did not give up. */
    public boolean isHealthy() {
        synchronized (registry) {
            for (Versions v : models.values()) {
                Model m = v.byVersion.get(v.defaultVersion);
                if (m != null && m.activeWorkers().size() < m.getSettings().minWorkers) {
                    return false;
                }
            }
        }
        return true;
    }

    /** Stops everything: queued jobs get 503, in-flight batches finish (bounded), workers exit. */
    public void shutdown() {
        shuttingDown = true;
        List<Model> all = new ArrayList<>();
        synchronized (registry) {
            for (Versions v : models.values()) {
                all.addAll(v.byVersion.values());
            }
            models.clear();
        }
        List<Thread> stoppers = new ArrayList<>();
        for (Model m : all) {
            Thread t = new Thread(() -> stopModel(m, "Server is shutting down; request not served."), "stop-" + m.name);
            t.start();
            stoppers.add(t);
        }
        for (Thread t : stoppers) {
            try {
                t.join(cfg.getInt("unregister_model_timeout") * 1000L + 5000L);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        scheduler.shutdownNow();
    }

    // ---- for worker threads ----

    WorkerEnvironment workerEnvironment() {
        return env;
    }

    ScheduledExecutorService scheduler() {
        return scheduler;
    }

    long maxResponseSize() {
        return cfg.getInt("max_response_size");
    }

    void jobDone(Model m, int status, long queueNanos, long backendNanos) {
        for (WlmListener l : listeners) {
            try {
                l.onJobDone(m.name, m.version, status, queueNanos, backendNanos);
            } catch (RuntimeException e) {
                LOG.warning("listener failed: " + e);
            }
        }
    }

    void workerThreadTime(Model m, String workerName, long nanos) {
        for (WlmListener l : listeners) {
            try {
                l.onWorkerThreadTime(m.name, m.version, workerName, nanos);
            } catch (RuntimeException e) {
                LOG.warning("listener failed: " + e);
            }
        }
    }

    void workerLoaded(Model m, String workerName, long millis) {
        for (WlmListener l : listeners) {
            try {
                l.onWorkerLoaded(m.name, m.version, workerName, millis);
            } catch (RuntimeException e) {
                LOG.warning("listener failed: " + e);
            }
        }
    }

    void handlerMetrics(Model m, String workerId, String json) {
        for (WlmListener l : listeners) {
            try {
                l.onHandlerMetrics(m.name, m.version, workerId, json);
            } catch (RuntimeException e) {
                LOG.warning("listener failed: " + e);
            }
        }
    }
}

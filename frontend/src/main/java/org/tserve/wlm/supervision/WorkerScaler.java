package org.tserve.wlm.supervision;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.logging.log4j.Logger;
import org.tserve.config.ConfigManager;
import org.tserve.config.ModelSettings;
import org.tserve.dist.DeviceAllocator;
import org.tserve.dist.DeviceReservation;
import org.tserve.dist.InsufficientDevicesException;
import org.tserve.dist.PortBlockAllocator;
import org.tserve.dist.TorchrunOptions;
import org.tserve.util.Logging;
import org.tserve.wlm.api.StatusResult;
import org.tserve.wlm.api.WlmException;
import org.tserve.wlm.api.WorkerState;

/** Starts and stops the workers of models: their ports and devices, scaling, waiting for load and stop. */
public final class WorkerScaler {
    // logs as ModelManager did before the split: same log lines, same --log-config level
    private static final Logger LOG = Logging.logger(WorkerScaler.class);

    /** Given to every worker: what it needs of the server (launch settings, timer, event listeners). */
    private final WorkerContext ctx;
    private final ConfigManager cfg;
    private final AtomicInteger nextPort;
    /** The server's accelerators: each distributed worker holds parallelLevel of them. */
    private final DeviceAllocator devices;
    /** Rank sockets and rendezvous port of torchrun workers, from initial_distribution_port. */
    private final PortBlockAllocator distPorts;
    /** Workers started and not yet stopped for good, over all models (for max_workers). */
    private int liveWorkers;

    public WorkerScaler(WorkerContext ctx, ConfigManager cfg, DeviceAllocator devices, PortBlockAllocator distPorts) {
        this.ctx = ctx;
        this.cfg = cfg;
        this.nextPort = new AtomicInteger(cfg.getInt("initial_worker_port"));
        this.devices = devices;
        this.distPorts = distPorts;
    }

    /**
     * Starts {@code n} workers, or none: every worker's ports and devices are reserved first, and
     * a request that does not fit is refused (507, naming how many devices are needed and free).
     */
    public List<WorkerThread> addWorkers(ServedModel model, int n) throws WlmException {
        // Under the model's lock, against stopAll: a caller that found the model before it was
        // unregistered (a scale, a registration) must not add a worker after stopAll took its list
        // of workers to stop, or that worker outlives the model (issue 43's storm).
        synchronized (model) {
            refuseRetired(model);
            ModelSettings s = model.getSettings();
            TorchrunOptions d = model.dist;
            List<WorkerThread> out = new ArrayList<>();
            synchronized (this) {
                checkCaps(model.name, model.active().size(), n, liveWorkers, cfg.getInt("max_workers_per_model"),
                        cfg.getInt("max_workers"));
                liveWorkers += n;
            }
            try {
                for (int i = 0; i < n; i++) {
                    out.add(newWorker(model, s, d, i, n));
                }
            } catch (WlmException e) {
                out.forEach(this::releaseResources);
                synchronized (this) {
                    liveWorkers -= n;
                }
                throw e;
            }
            for (WorkerThread w : out) {
                start(model, w);
            }
            return out;
        }
    }

    /** 404 for a model that was taken out of the registry: it gets no worker any more. Call with its lock held. */
    private static void refuseRetired(ServedModel model) throws WlmException {
        if (model.retired) {
            throw new WlmException(404, "Model \"" + model.name + "\" version " + model.version
                    + " was unregistered; no worker is started for it");
        }
    }

    /** Starts a worker made by {@link #newWorker} as one of {@code model}'s workers. */
    public void start(ServedModel model, WorkerThread w) {
        model.workers.add(w);
        w.start();
    }

    /**
     * Refuses (400, naming the key) adding {@code adding} workers to a model that has {@code have}
     * when that passes {@code max_workers_per_model} or the server's {@code max_workers} (0 = no cap).
     */
    static void checkCaps(String model, int have, int adding, int live, int perModel, int total) throws WlmException {
        if (perModel > 0 && have + adding > perModel) {
            throw new WlmException(400, "Model " + model + ": " + (have + adding) + " workers requested, but "
                    + "max_workers_per_model (config.properties) allows at most " + perModel);
        }
        if (total > 0 && live + adding > total) {
            throw new WlmException(400, "Model " + model + ": " + adding + " more workers requested, but the server runs "
                    + live + " and max_workers (config.properties) allows at most " + total);
        }
    }

    /** Worker {@code i} of {@code n}, its port(s) and devices reserved, not started. */
    public WorkerThread newWorker(ServedModel model, ModelSettings s, TorchrunOptions d, int i, int n) throws WlmException {
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
            return new WorkerThread(ctx, model, port, gpuFor(model, s), null, 0, w -> workerStopped(model, w));
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
        WorkerThread w = new WorkerThread(ctx, model, port, held == null ? -1 : 0, held, rdzv, t -> workerStopped(model, t));
        List<MemberClient> members = MemberClient.parse(cfg.get("cluster_members"), cfg.get("cluster_key"));
        if (d.usesTorchrun() && d.nnodes > 1 && !members.isEmpty() && !model.isMemberPart()) {
            if (members.size() < d.nnodes - 1) {
                devices.release(held);
                distPorts.release(port, d.ranks() + 1);
                throw new WlmException(400, "Model " + model.name + ": torchrun.nnodes is " + d.nnodes
                        + " but cluster_members lists " + members.size() + " member node(s) besides this leader");
            }
            w.leadNodes(members.subList(0, d.nnodes - 1), cfg.get("cluster_address"),
                    cfg.get("management_address"));
        }
        return w;
    }

    /** Gives a stopped worker's devices and ports back. */
    private void releaseResources(WorkerThread w) {
        devices.release(w.getDevices());
        if (w.getRdzvPort() > 0) {
            int port = Integer.parseInt(w.getId());
            distPorts.release(port, w.getRdzvPort() - port + 1);
        }
    }

    /** A plain worker's GPU: round robin over the model's deviceIds, else over all GPUs; -1 on CPU. */
    private int gpuFor(ServedModel model, ModelSettings s) {
        int gpus = cfg.getNumberOfGpu();
        if (!"gpu".equals(s.deviceType) || gpus == 0) {
            return -1;
        }
        int i = model.gpuCounter.getAndIncrement();
        return s.deviceIds.isEmpty() ? i % gpus : s.deviceIds.get(i % s.deviceIds.size());
    }

    /** Waits until every worker has loaded its model; the first failure (or the deadline) throws. */
    public void awaitLoaded(List<WorkerThread> workers, ModelSettings s) throws WlmException {
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

    /** Refuses a worker range before the model is looked up (400 comes before 404). */
    public static void checkRange(int min, int max) throws WlmException {
        if (min < 0 || max < 0) {
            throw new WlmException(400, "min_worker and max_worker must not be negative");
        }
        if (max < min) {
            throw new WlmException(400, "max_worker cannot be less than min_worker.");
        }
    }

    /**
     * Scales {@code model} to at least {@code min} and at most {@code max} workers (see
     * {@code ModelManager.scale}); a refused scale-up leaves its settings as they were, and a model
     * already unregistered is refused (404).
     *
     * @param versionNamed whether the client named the version (the answer then repeats it)
     */
    public StatusResult scale(ServedModel model, boolean versionNamed, int min, int max, boolean synchronous) throws WlmException {
        List<WorkerThread> added;
        List<WorkerThread> removed = new ArrayList<>();
        synchronized (model) {
            refuseRetired(model);
            ModelSettings before = model.getSettings();
            ModelSettings s = before.copy();
            s.minWorkers = min;
            s.maxWorkers = max;
            model.setSettings(s);
            List<WorkerThread> active = model.active();
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
        String versionText = versionNamed ? ", version: " + model.version : "";
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
        return new StatusResult(200, "Workers scaled to " + model.active().size() + " for model: " + model.name
                + versionText);
    }

    /**
     * Retires {@code model} (no worker is added to it after this) and stops every worker it has,
     * waiting for them (unregister, failed registration, shutdown).
     */
    public void stopAll(ServedModel model) {
        List<WorkerThread> ws;
        synchronized (model) {   // from here on addWorkers refuses: ws is every worker the model will ever have
            model.retired = true;
            ws = new ArrayList<>(model.workers);
        }
        for (WorkerThread w : ws) {
            w.stop();
        }
        awaitStopped(model, ws);
    }

    /**
     * Waits up to unregister_model_timeout for stopping workers, killing the late ones; then
     * answers a scaled-to-zero model's queued jobs, as no worker will take them.
     */
    public void awaitStopped(ServedModel model, List<WorkerThread> workers) {
        long timeout = cfg.getInt("unregister_model_timeout") * 1000L;
        long deadline = System.currentTimeMillis() + timeout;
        for (WorkerThread w : workers) {
            try {
                w.stoppedFuture().get(Math.max(1, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
            } catch (TimeoutException | ExecutionException e) {
                LOG.warn("Worker " + w.getId() + " of model " + model.name + " did not stop in time; killing it");
                w.killNow();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                w.killNow();
            }
        }
        if (model.active().isEmpty() && model.getSettings().minWorkers == 0) {
            int n = model.failQueued(503, "Model \"" + model.name + "\" was scaled to 0 workers before this request was "
                    + "served. Please use scale workers API to add workers.");
            if (n > 0) {
                LOG.info("Answered " + n + " queued requests of model " + model.name + " with 503 (scaled to zero)");
            }
        }
    }

    /** A worker thread has stopped for good: its resources go back, and a model left without workers fails its queue. */
    public void workerStopped(ServedModel model, WorkerThread w) {
        if (model.workers.remove(w)) {
            synchronized (this) {
                liveWorkers--;
            }
        }
        releaseResources(w);
        if (model.active().isEmpty() && !model.queue.isEmpty() && w.getState() == WorkerState.STOPPED
                && !w.isStopping()) {
            model.failQueued(503, "Model \"" + model.name + "\" has no worker left (workers failed to recover)");
        }
    }
}

package org.tserve.wlm;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.tserve.config.ModelSettings;
import org.tserve.dist.DeviceReservation;
import org.tserve.wlm.protocol.Codec;
import org.tserve.wlm.protocol.Frame;
import org.tserve.wlm.protocol.FrameType;
import org.tserve.wlm.protocol.Request;
import org.tserve.wlm.protocol.Response;

/**
 * Drives one backend process: launch, connect, LOAD, then a writer loop that sends batches and a
 * reader thread that matches RESULT/CHUNK frames to in-flight batches by batch id (several
 * batches may be in flight, see {@link ModelSettings#inFlightLimit()}). A backend that dies or
 * times out fails only the jobs it held and is restarted with TorchServe's backoff.
 */
final class WorkerThread {
    private static final Logger LOG = Logger.getLogger(WorkerThread.class.getName());
    /** Seconds to wait before the n-th restart (TorchServe's sequence). */
    static final int[] BACKOFF = {1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987, 1597};
    private static final long LOAD_BATCH_ID = 1;

    private final ModelManager manager;
    private final Model model;
    private final int port;
    private final int gpuId;
    private final String name;
    private final CompletableFuture<Void> firstLoad = new CompletableFuture<>();
    private final CompletableFuture<Void> stopped = new CompletableFuture<>();
    private final CountDownLatch stopSignal = new CountDownLatch(1);
    private final Map<Long, Batch> inFlight = new ConcurrentHashMap<>();
    private final AtomicLong batchIds = new AtomicLong(LOAD_BATCH_ID);
    private volatile WorkerState state = WorkerState.STARTING;
    private volatile boolean stopping;
    private volatile long startTime = System.currentTimeMillis();
    private volatile WorkerProcess process;
    private volatile Connection conn;
    /** The connection while {@link #writeLoop} serves it: {@link #dispatchNow} may write to it then. */
    private volatile Connection serving;
    /** How often {@link #sweepTimeouts} looks for batches past their responseTimeout. */
    static final long SWEEP_MILLIS = 100;
    private volatile ScheduledFuture<?> sweeper;
    /** Jobs written by the thread that submitted them (dispatchNow), for tests. */
    private final AtomicLong directDispatches = new AtomicLong();
    /** Bigger batches go through the writer thread: the event loop must not wait on a full socket. */
    static final int DIRECT_MAX_BYTES = 64 * 1024;

    /** A batch written to the backend and not yet answered. */
    private static final class Batch {
        final long id;
        final List<Job> jobs;
        final Map<String, Job> byId = new HashMap<>();
        /** The connection it was written to, and when its responseTimeout runs out ({@link #sweepTimeouts}). */
        volatile Connection conn;
        volatile long deadlineNanos;
        volatile int timeoutSec;
        /** Time this thread spent encoding and writing the batch (WorkerThreadTime metric). */
        volatile long frontendNanos;

        Batch(long id, List<Job> jobs) {
            this.id = id;
            this.jobs = jobs;
            for (Job j : jobs) {
                byId.put(j.getId(), j);
            }
        }
    }

    /**
     * The sockets to the backend (one per rank of a torchrun job; rank 0 answers inference) plus
     * the reader threads' state.
     */
    private final class Connection {
        final SocketChannel[] channels;
        final Object writeLock = new Object();
        final List<CompletableFuture<Frame>> loadReplies = new ArrayList<>();
        final Semaphore permits;
        final int permitCount;
        volatile String deadReason;
        /** The rank whose connection closed first (-1: the frontend ended the connection). */
        volatile int deadRank = -1;
        /** The PING in flight on rank 0 (describe's stages), completed by its PONG. */
        volatile CompletableFuture<String> pong;

        Connection(SocketChannel[] channels, int inFlightLimit) {
            this.channels = channels;
            this.permits = new Semaphore(inFlightLimit);
            this.permitCount = inFlightLimit;
            for (int i = 0; i < channels.length; i++) {
                loadReplies.add(new CompletableFuture<>());
            }
        }

        boolean alive() {
            return deadReason == null;
        }

        /** Writes to rank 0, or to every rank when {@code allRanks}. */
        void write(int type, long batchId, byte[] body, boolean allRanks) throws IOException {
            synchronized (writeLock) {
                for (int r = 0; r < (allRanks ? channels.length : 1); r++) {
                    Codec.write(channels[r], type, batchId, body);
                }
            }
        }

        void die(String reason) {
            die(reason, -1);
        }

        synchronized void die(String reason, int rank) {
            if (deadReason == null) {
                deadReason = reason;
                deadRank = rank;
            }
            for (CompletableFuture<Frame> f : loadReplies) {
                f.completeExceptionally(new IOException(reason));
            }
            CompletableFuture<String> p = pong;
            if (p != null) {
                p.complete(null);
            }
            for (SocketChannel ch : channels) {
                try {
                    ch.close();
                } catch (IOException ignored) {
                    // already closed
                }
            }
        }
    }

    /** A worker failure that ends the current process (the message is for logs and clients). */
    private static final class WorkerFailure extends Exception {
        private static final long serialVersionUID = 1L;
        final int status;

        WorkerFailure(int status, String message) {
            super(message);
            this.status = status;
        }
    }

    /** Devices reserved for this worker (held until it stops for good), or null. */
    private final DeviceReservation devices;
    /** Rendezvous port of a torchrun job (0 for a plain worker). */
    private final int rdzvPort;
    /** Per rank: pid (from its LOADED answer, -1 before) and state, for describe. */
    private volatile long[] rankPids = new long[0];
    private volatile String[] rankStates = new String[0];
    /** Elastic restarts torchrun made in the current agent's lifetime. */
    private volatile int elasticRestarts;

    WorkerThread(ModelManager manager, Model model, int port, int gpuId, DeviceReservation devices, int rdzvPort) {
        this.manager = manager;
        this.model = model;
        this.port = port;
        this.gpuId = gpuId;
        this.devices = devices;
        this.rdzvPort = rdzvPort;
        this.name = name(port, model);
    }

    /** The worker's name in logs and metrics: {@code W-<port>-<model>_<version>}. */
    static String name(int port, Model model) {
        return "W-" + port + "-" + model.name + "_" + model.version;
    }

    DeviceReservation getDevices() {
        return devices;
    }

    int getRdzvPort() {
        return rdzvPort;
    }

    String getName() {
        return name;
    }

    /** The ranks of a distributed worker (empty for a plain one). */
    List<RankDescription> getRanks() {
        if (!model.dist.isParallel()) {
            return List.of();
        }
        long[] pids = rankPids;
        String[] states = rankStates;
        List<RankDescription> out = new ArrayList<>();
        for (int r = 0; r < pids.length; r++) {
            out.add(new RankDescription(r, pids[r], devicesOf(r), states[r]));
        }
        return out;
    }

    /** Local rank r sees CUDA device r of the worker's CUDA_VISIBLE_DEVICES (custom: all of them). */
    private String devicesOf(int rank) {
        if (devices == null) {
            return "cpu";
        }
        if (!model.dist.usesTorchrun()) {
            return devices.cudaVisibleDevices();
        }
        List<Integer> ids = devices.deviceIds();
        return rank < ids.size() ? String.valueOf(ids.get(rank)) : "cpu";
    }

    private void setRanks(int n, String state) {
        long[] pids = new long[n];
        String[] states = new String[n];
        java.util.Arrays.fill(pids, -1);
        java.util.Arrays.fill(states, state);
        rankPids = pids;
        rankStates = states;
    }

    private void markRanks(String state) {
        String[] states = rankStates.clone();
        java.util.Arrays.fill(states, state);
        rankStates = states;
    }

    void start() {
        Thread t = new Thread(this::run, name);
        t.setDaemon(true);
        sweeper = manager.scheduler().scheduleWithFixedDelay(this::sweepTimeouts, SWEEP_MILLIS, SWEEP_MILLIS,
                TimeUnit.MILLISECONDS);
        t.start();
    }

    /**
     * Answers 504 for batches past their responseTimeout. One periodic check per worker instead
     * of a timer task per batch: scheduling one woke the timer thread on every request.
     */
    private void sweepTimeouts() {
        if (inFlight.isEmpty()) {
            return;
        }
        long now = System.nanoTime();
        for (Batch b : inFlight.values()) {
            if (now - b.deadlineNanos >= 0) {
                onTimeout(b.conn, b, b.timeoutSec);
            }
        }
    }

    String getId() {
        return String.valueOf(port);
    }

    int getGpuId() {
        return gpuId;
    }

    WorkerState getState() {
        return state;
    }

    long directDispatches() {
        return directDispatches.get();
    }

    boolean isStopping() {
        return stopping;
    }

    long getStartTime() {
        return startTime;
    }

    long getPid() {
        WorkerProcess p = process;
        return p == null ? -1 : p.pid();
    }

    long getMemoryUsage() {
        WorkerProcess p = process;
        return p == null || !p.isAlive() ? 0 : p.memoryUsage();
    }

    /**
     * Asks the backend for its PONG (pipeline stages, pool pids: docs/protocol.md). Completes with
     * the PONG json, or with null when the worker is not serving; concurrent callers share one PING.
     */
    CompletableFuture<String> ping() {
        Connection c = conn;
        if (c == null || !c.alive() || state != WorkerState.READY) {
            return CompletableFuture.completedFuture(null);
        }
        CompletableFuture<String> f;
        synchronized (c) {
            if (c.pong != null && !c.pong.isDone()) {
                return c.pong;
            }
            f = new CompletableFuture<>();
            c.pong = f;
        }
        try {
            c.write(FrameType.PING, 0, new byte[0], false);
        } catch (IOException e) {
            f.complete(null);
        }
        return f;
    }

    /** Completes when the first model load succeeded; fails with a WlmException when it did not. */
    CompletableFuture<Void> firstLoad() {
        return firstLoad;
    }

    /** Completes when the worker has stopped for good. */
    CompletableFuture<Void> stoppedFuture() {
        return stopped;
    }

    /** Asks the worker to stop: no new batches, in-flight batches finish, then STOP and exit. */
    void stop() {
        stopping = true;
        stopSignal.countDown();
    }

    /** Kills the backend at once (used when a graceful stop takes too long). */
    void killNow() {
        stop();
        Connection c = conn;
        if (c != null) {
            c.die("worker killed");
        }
        WorkerProcess p = process;
        if (p != null) {
            p.kill();
        }
    }

    // ---- lifecycle ----

    private void run() {
        int retries = 0;
        long recoveryStart = 0;
        try {
            while (!stopping) {
                boolean loaded = false;
                String failure;
                int failureStatus = 500;
                try {
                    loaded = runOnce();
                    failure = conn != null && conn.deadReason != null ? conn.deadReason : null;
                } catch (WorkerFailure e) {
                    failure = e.getMessage();
                    failureStatus = e.status;
                } catch (IOException e) {
                    failure = "I/O error talking to the worker: " + e.getMessage();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    failure = "interrupted";
                } catch (RuntimeException e) {
                    LOG.log(Level.SEVERE, name + ": unexpected error", e);
                    failure = "unexpected frontend error: " + e;
                }
                loaded = loaded || state == WorkerState.READY;
                cleanup(failure);
                if (!firstLoad.isDone()) {
                    firstLoad.completeExceptionally(new WlmException(failureStatus == 200 ? 500 : failureStatus,
                            failure == null ? "worker stopped before loading the model" : failure));
                }
                if (stopping) {
                    break;
                }
                if (loaded) {
                    retries = 0;
                    recoveryStart = 0;
                }
                long now = System.currentTimeMillis();
                if (recoveryStart == 0) {
                    recoveryStart = now;
                    LOG.info(name + ": Auto recovery start timestamp: " + now);
                } else if (now - recoveryStart > model.getSettings().maxRetryTimeoutInSec * 1000L) {
                    LOG.severe(name + ": Auto recovery failed again; worker gives up after maxRetryTimeoutInSec="
                            + model.getSettings().maxRetryTimeoutInSec + " s");
                    break;
                }
                int delay = BACKOFF[Math.min(retries, BACKOFF.length - 1)];
                retries++;
                state = WorkerState.RESTARTING;
                markRanks("RESTARTING");
                LOG.warning(name + ": Retry worker: " + port + " in " + delay + " seconds. (" + failure + ")");
                if (stopSignal.await(delay, TimeUnit.SECONDS)) {
                    break;
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            state = WorkerState.STOPPED;
            markRanks("STOPPED");
            if (!firstLoad.isDone()) {
                firstLoad.completeExceptionally(new WlmException(500, "worker stopped before loading the model"));
            }
            ScheduledFuture<?> sw = sweeper;
            if (sw != null) {
                sw.cancel(false);
            }
            manager.workerStopped(model, this);   // devices and ports are free once stopped() completes
            stopped.complete(null);
        }
    }

    /**
     * One process lifetime; returns true if the model got loaded. A torchrun job whose rank died
     * while torch.distributed.elastic restarts the group is reconnected and reloaded within the
     * same lifetime (the agent keeps running).
     */
    private boolean runOnce() throws WorkerFailure, IOException, InterruptedException {
        state = WorkerState.STARTING;
        startTime = System.currentTimeMillis();
        ModelSettings s = model.getSettings();
        WorkerEnvironment env = manager.workerEnvironment();
        elasticRestarts = 0;
        setRanks(model.dist.isParallel() ? model.dist.ranks() : 0, "STARTING");
        process = WorkerProcess.start(env, model, port, name, devices, rdzvPort);
        while (true) {
            Connection c = connectAndLoad(env, model.getSettings());
            state = WorkerState.READY;
            markRanks("READY");
            LOG.info(name + ": model " + model.name + " version " + model.version + " loaded by worker pid "
                    + process.pid() + (elasticRestarts > 0 ? " after elastic restart " + elasticRestarts : ""));
            manager.workerLoaded(model, name, System.currentTimeMillis() - startTime);
            firstLoad.complete(null);
            writeLoop(c);
            if (stopping) {
                if (c.alive()) {
                    drainAndStop(c, s);
                }
                return true;
            }
            if (!elasticRestart(c)) {
                return true;
            }
        }
    }

    private Connection connectAndLoad(WorkerEnvironment env, ModelSettings s)
            throws WorkerFailure, IOException, InterruptedException {
        long deadline = System.currentTimeMillis() + s.startupTimeout * 1000L;
        int ranks = model.dist.ranks();
        SocketChannel[] chs = new SocketChannel[ranks];
        try {
            for (int r = 0; r < ranks; r++) {
                chs[r] = connect(env, port + r, deadline, s.startupTimeout);
            }
        } catch (WorkerFailure | InterruptedException e) {
            for (SocketChannel ch : chs) {
                if (ch != null) {
                    ch.close();
                }
            }
            throw e;
        }
        Connection c = new Connection(chs, s.inFlightLimit());
        conn = c;
        for (int r = 0; r < ranks; r++) {
            int rank = r;
            Thread reader = new Thread(() -> readLoop(c, rank), name + "-reader" + (ranks > 1 ? "-rank" + r : ""));
            reader.setDaemon(true);
            reader.start();
        }
        load(c, deadline, s);
        return c;
    }

    /**
     * After a rank's connection closed: if the torchrun agent lives and has restarts left, fail
     * the in-flight jobs saying so and return true (the caller reconnects to the restarted
     * ranks); else return false and let the worker restart with the normal backoff.
     */
    private boolean elasticRestart(Connection c) {
        int dead = c.deadRank;
        if (!model.dist.usesTorchrun() || dead < 0) {
            return false;
        }
        int max = model.dist.maxRestarts;
        String who = "rank " + dead + " of worker " + port;
        if (elasticRestarts >= max || !process.isAlive()) {
            c.deadReason = who + " died; torchrun has no restarts left (max-restarts " + max
                    + "): the worker is restarted";
            return false;
        }
        elasticRestarts++;
        String msg = who + " died; torchrun is restarting the ranks (restart " + elasticRestarts + " of " + max + ")";
        LOG.warning(name + ": " + msg);
        state = WorkerState.STARTING;
        markRanks("RESTARTING");
        failInFlight(msg);
        return true;
    }

    private void failInFlight(String msg) {
        for (Long id : new ArrayList<>(inFlight.keySet())) {
            Batch b = inFlight.remove(id);
            if (b != null) {
                for (Job j : b.jobs) {
                    j.fail(500, msg);
                }
            }
        }
    }

    private SocketChannel connect(WorkerEnvironment env, int rankPort, long deadline, int timeoutSec)
            throws WorkerFailure, InterruptedException {
        while (true) {
            WorkerProcess p = process;
            if (!p.isAlive()) {
                p.drainLogs(500);
                throw new WorkerFailure(500, "Worker process exited with status " + p.exitStatus()
                        + " before it was ready: " + p.lastErrorLines(8));
            }
            if (stopping) {
                throw new WorkerFailure(503, "worker stopped while starting");
            }
            SocketChannel ch = null;
            try {
                if (env.useTcp) {
                    ch = SocketChannel.open();
                    ch.connect(new InetSocketAddress("127.0.0.1", rankPort));
                } else {
                    ch = SocketChannel.open(StandardProtocolFamily.UNIX);
                    ch.connect(UnixDomainSocketAddress.of(WorkerProcess.socketPath(env, rankPort)));
                }
                return ch;
            } catch (IOException e) {
                if (ch != null) {
                    try {
                        ch.close();
                    } catch (IOException ignored) {
                        // nothing to do
                    }
                }
            }
            if (System.currentTimeMillis() > deadline) {
                throw new WorkerFailure(500, "Worker did not start listening on " + (env.useTcp ? "port " : "socket ")
                        + rankPort + " within startupTimeout " + timeoutSec + " s: " + p.lastErrorLines(5));
            }
            Thread.sleep(20);
        }
    }

    private void load(Connection c, long deadline, ModelSettings s) throws WorkerFailure, IOException, InterruptedException {
        WorkerEnvironment env = manager.workerEnvironment();
        JsonObject j = new JsonObject();
        j.addProperty("modelName", model.name);
        j.addProperty("modelVersion", model.version);
        j.addProperty("modelPath", model.getArchive().getModelDir().toString());
        j.addProperty("handler", model.handler);
        j.addProperty("envelope", env.serviceEnvelope);
        j.addProperty("batchSize", s.batchSize);
        j.addProperty("gpuId", gpuId);
        j.addProperty("deviceType", gpuId >= 0 ? "gpu" : "cpu");
        j.addProperty("limitMaxImagePixels", env.limitMaxImagePixels);
        j.addProperty("parallelType", s.parallelType);
        j.addProperty("parallelLevel", s.parallelLevel);
        j.addProperty("preprocessWorkers", s.preprocessWorkers);
        j.addProperty("postprocessInPool", s.postprocessInPool);
        j.addProperty("workerName", name);
        c.write(FrameType.LOAD, LOAD_BATCH_ID, j.toString().getBytes(StandardCharsets.UTF_8), true);
        for (int rank = 0; rank < c.loadReplies.size(); rank++) {
            checkLoaded(c, rank, deadline, s);
        }
    }

    private void checkLoaded(Connection c, int rank, long deadline, ModelSettings s)
            throws WorkerFailure, InterruptedException {
        String who = c.loadReplies.size() > 1 ? " (rank " + rank + ")" : "";
        Frame f;
        try {
            f = c.loadReplies.get(rank).get(Math.max(1, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            throw new WorkerFailure(500, "Worker" + who + " did not load the model within startupTimeout "
                    + s.startupTimeout + " s");
        } catch (java.util.concurrent.ExecutionException e) {
            process.stop(2000);
            process.drainLogs(500);
            throw new WorkerFailure(500, "Worker" + who + " closed the connection while loading (exit status "
                    + process.exitStatus() + "): " + process.lastErrorLines(8));
        }
        int status = 500;
        String message = f.text();
        try {
            JsonObject r = JsonParser.parseString(f.text()).getAsJsonObject();
            status = r.has("status") ? r.get("status").getAsInt() : 500;
            message = r.has("message") ? r.get("message").getAsString() : message;
        } catch (RuntimeException e) {
            message = "unreadable " + FrameType.name(f.type) + " answer: " + f.text();
        }
        if (f.type == FrameType.LOADED && status == 200 && model.dist.isParallel()) {
            noteRank(rank, f.text());
        }
        if (f.type != FrameType.LOADED || status != 200) {
            process.drainLogs(300);
            String tail = process.lastErrorLines(5);
            LOG.severe(name + ": model load failed" + who + " (" + status + "): " + message
                    + (tail.isEmpty() ? "" : " | " + tail));
            // 4xx: the worker refused the model as configured (e.g. a handler the preprocess pool cannot
            // split); its message says why, so the worker's output is not appended
            if (status >= 400 && status < 500) {
                throw new WorkerFailure(status, message + who);
            }
            throw new WorkerFailure(status == 507 ? 507 : 500, message + who
                    + (tail.isEmpty() ? "" : " | last worker output: " + tail));
        }
    }

    /** Records a rank's pid from its LOADED answer, and its store address (DeepSpeed's shm names). */
    private void noteRank(int rank, String loaded) {
        try {
            JsonObject r = JsonParser.parseString(loaded).getAsJsonObject();
            if (r.has("pid") && rank < rankPids.length) {
                long pid = r.get("pid").getAsLong();
                long[] pids = rankPids.clone();
                pids[rank] = pid;
                rankPids = pids;
                if (model.dist.usesTorchrun()) {
                    process.noteRankEnvironment(ProcessTree.environ(pid));
                }
            }
        } catch (RuntimeException ignored) {
            // an old worker without pid: describe shows -1
        }
    }

    private void writeLoop(Connection c) throws InterruptedException {
        serving = c;
        try {
            while (!stopping && c.alive()) {
                if (!c.permits.tryAcquire(200, TimeUnit.MILLISECONDS)) {
                    continue;   // every batch this worker can take is in flight
                }
                // Wait for work without holding the permit: a job that finds this worker idle is
                // then written by the thread that received it (dispatchNow), without waking this one.
                c.permits.release();
                Job first = model.queue.poll(200, TimeUnit.MILLISECONDS);
                if (first == null) {
                    continue;
                }
                if (!c.permits.tryAcquire()) {   // dispatchNow took the permit meanwhile
                    requeue(List.of(first));
                    continue;
                }
                ModelSettings s = model.getSettings();
                List<Job> jobs = BatchAggregator.pollAfter(first, model.queue, s.batchSize, s.maxBatchDelay,
                        s.dispatchPolicy);
                if (stopping || !c.alive()) {
                    requeue(jobs);
                    c.permits.release();
                    break;
                }
                List<Request> reqs = new ArrayList<>(jobs.size());
                for (Job j : jobs) {
                    reqs.add(j.toRequest());
                }
                dispatch(c, jobs, Codec.encodeBatch(reqs), s);
            }
        } finally {
            serving = null;
        }
    }

    /**
     * Writes {@code job} to this worker from the calling thread (the event loop that received it)
     * when the worker is idle and the job would go alone anyway, saving the hand-off to the writer
     * thread. Only for a plain (one-rank) worker with nothing in flight and a small batch, so the
     * write cannot block on a full socket. Returns false, having changed nothing, otherwise: the
     * caller queues the job.
     */
    boolean dispatchNow(Job job) {
        Connection c = serving;
        if (c == null || stopping || !c.alive() || c.channels.length != 1 || !inFlight.isEmpty()
                || job.getKind() != Job.Kind.INFERENCE || !c.permits.tryAcquire()) {
            return false;
        }
        ModelSettings s = model.getSettings();
        byte[] body = null;
        if (serving == c && !stopping && inFlight.isEmpty() && model.queue.isEmpty()) {
            body = Codec.encodeBatch(List.of(job.toRequest()));
        }
        if (body == null || body.length > DIRECT_MAX_BYTES
                || !BatchAggregator.sendsAloneNow(model.queue, job, s.batchSize, s.dispatchPolicy)) {
            c.permits.release();
            return false;
        }
        Batch b = dispatch(c, List.of(job), body, s);
        directDispatches.incrementAndGet();
        // The connection may have died before the batch was registered, after the cleanup failed
        // what was in flight: then nobody else answers it.
        if (!c.alive() && inFlight.remove(b.id, b)) {
            job.fail(500, "Worker died. (worker " + port + " of model " + model.name + ": " + c.deadReason + ")");
        }
        return true;
    }

    /** Registers the batch as in flight (with its response timeout) and writes it; holds a permit. */
    private Batch dispatch(Connection c, List<Job> jobs, byte[] body, ModelSettings s) {
        long id = nextBatchId();
        Batch b = new Batch(id, jobs);
        for (Job j : jobs) {
            j.markDispatched();
        }
        b.conn = c;
        b.timeoutSec = s.responseTimeout;
        b.deadlineNanos = System.nanoTime() + TimeUnit.SECONDS.toNanos(s.responseTimeout);
        inFlight.put(id, b);   // after the fields above: the sweeper reads them
        try {
            long t0 = System.nanoTime();
            c.write(FrameType.INFERENCE, id, body, model.dist.usesTorchrun() && model.dist.broadcastsInference());
            b.frontendNanos = System.nanoTime() - t0;
        } catch (IOException e) {
            c.die("write to worker failed: " + e.getMessage());
        }
        return b;
    }

    private long nextBatchId() {
        long id = batchIds.incrementAndGet() & 0xffffffffL;
        if (id <= LOAD_BATCH_ID) {
            batchIds.set(LOAD_BATCH_ID + 1);
            id = LOAD_BATCH_ID + 1;
        }
        return id;
    }

    private void requeue(List<Job> jobs) {
        for (int i = jobs.size() - 1; i >= 0; i--) {
            Job j = jobs.get(i);
            if (!model.queue.offerFirst(j)) {
                j.fail(503, "Job queue of model " + model.name + " is full; retry later");
            }
        }
    }

    private void onTimeout(Connection c, Batch b, int timeoutSec) {
        if (inFlight.remove(b.id, b)) {
            String msg = "Model \"" + model.name + "\" did not answer within its responseTimeout of " + timeoutSec
                    + " s; worker " + port + " is restarted";
            LOG.warning(name + ": " + msg);
            for (Job j : b.jobs) {
                j.fail(504, msg);
            }
            c.die("response timeout after " + timeoutSec + " s");
            c.permits.release();   // after die: a request answered by the 504 must not go to this connection
            WorkerProcess p = process;
            if (p != null) {
                p.kill();
            }
        }
    }

    private void drainAndStop(Connection c, ModelSettings s) throws InterruptedException {
        long deadline = System.currentTimeMillis() + s.responseTimeout * 1000L;
        // Every permit back means nothing in flight and no dispatchNow under way that could write after STOP.
        boolean all = false;
        while (c.alive() && System.currentTimeMillis() < deadline
                && !(all = c.permits.tryAcquire(c.permitCount, 20, TimeUnit.MILLISECONDS))) {
            // waiting for the last answers
        }
        if (all) {
            c.permits.release(c.permitCount);
        }
        try {
            c.write(FrameType.STOP, 0, new byte[0], true);
        } catch (IOException ignored) {
            // the worker is gone already
        }
        c.die("worker stopped");
        process.stop(3000);
    }

    // ---- reader ----

    private void readLoop(Connection c, int rank) {
        long limit = manager.maxResponseSize();
        try {
            while (true) {
                Frame f = Codec.read(c.channels[rank], limit);
                if (rank > 0 && (f.type == FrameType.RESULT || f.type == FrameType.CHUNK)) {
                    continue;   // only rank 0 answers inference
                }
                switch (f.type) {
                    case FrameType.LOADED:
                        c.loadReplies.get(rank).complete(f);
                        break;
                    case FrameType.RESULT:
                        onResult(c, f);
                        break;
                    case FrameType.CHUNK:
                        onChunk(f);
                        break;
                    case FrameType.METRICS:
                        manager.handlerMetrics(model, String.valueOf(port), f.text());
                        break;
                    case FrameType.ERROR:
                        onErrorFrame(c, f, rank);
                        break;
                    case FrameType.PONG:
                        CompletableFuture<String> p = c.pong;
                        if (rank == 0 && p != null) {
                            p.complete(f.text());
                        }
                        break;
                    default:
                        LOG.warning(name + ": ignoring unexpected frame " + f);
                }
            }
        } catch (IOException e) {
            if (c.alive() && !stopping) {
                LOG.warning(name + ": Worker disconnected" + (c.channels.length > 1 ? " (rank " + rank + ")" : "") + ": "
                        + e.getMessage());
            }
            c.die((c.channels.length > 1 ? "rank " + rank + ": " : "")
                    + (e instanceof java.io.EOFException ? "worker closed the connection" : e.getMessage()), rank);
        } catch (RuntimeException e) {
            LOG.log(Level.SEVERE, name + ": reader failed", e);
            c.die("frontend reader failed: " + e);
        }
    }

    private void onResult(Connection c, Frame f) throws IOException {
        Batch b = inFlight.remove(f.batchId);
        if (b == null) {
            LOG.warning(name + ": RESULT for unknown batch " + f.batchId + " ignored");
            return;
        }
        try {
            List<Response> rs = Codec.decodeResponses(f.body);
            long now = System.nanoTime();
            for (Response r : rs) {
                Job j = b.byId.get(r.requestId());
                if (j == null) {
                    LOG.warning(name + ": RESULT names unknown request " + r.requestId());
                    continue;
                }
                if (j.result(r)) {
                    manager.jobDone(model, r.status(), j.getDispatchedNanos() - j.getCreatedNanos(),
                            now - j.getDispatchedNanos());
                }
            }
            for (Job j : b.jobs) {
                j.fail(500, "The worker's answer had no response for request " + j.getId());
            }
            manager.workerThreadTime(model, name, b.frontendNanos + System.nanoTime() - now);
        } finally {
            c.permits.release();
        }
    }

    private void onChunk(Frame f) throws IOException {
        Batch b = inFlight.get(f.batchId);
        if (b == null) {
            LOG.warning(name + ": CHUNK for unknown batch " + f.batchId + " ignored");
            return;
        }
        for (Response r : Codec.decodeResponses(f.body)) {
            Job j = b.byId.get(r.requestId());
            if (j != null) {
                j.chunk(r);
            }
        }
    }

    private void onErrorFrame(Connection c, Frame f, int rank) {
        int status = 500;
        String message = f.text();
        try {
            JsonObject r = JsonParser.parseString(f.text()).getAsJsonObject();
            status = r.has("status") ? r.get("status").getAsInt() : 500;
            message = r.has("message") ? r.get("message").getAsString() : message;
        } catch (RuntimeException ignored) {
            // keep the raw text
        }
        Batch b = inFlight.remove(f.batchId);
        if (b != null) {
            for (Job j : b.jobs) {
                j.fail(status, message);
            }
            c.permits.release();
        } else if (!c.loadReplies.get(rank).isDone()) {
            c.loadReplies.get(rank).complete(f);
        } else {
            LOG.warning(name + ": worker reported an error: " + message);
        }
    }

    private void cleanup(String failure) {
        Connection c = conn;
        WorkerProcess p = process;
        if (c != null) {
            c.die(failure == null ? "worker stopped" : failure);
        }
        Integer exit = null;
        if (p != null) {
            if (!stopping && failure != null) {
                p.stop(1000);
            } else {
                p.stop(3000);
            }
            exit = p.exitStatus();
            p.drainLogs(300);
        }
        if (!inFlight.isEmpty()) {
            String msg = "Worker died. (worker " + port + " of model " + model.name
                    + (exit == null ? "" : " exited with status " + exit) + (failure == null ? "" : ": " + failure) + ")";
            for (Long id : new ArrayList<>(inFlight.keySet())) {
                Batch b = inFlight.remove(id);
                if (b != null) {
                    for (Job j : b.jobs) {
                        j.fail(500, msg);
                    }
                }
            }
            LOG.warning(name + ": " + msg);
        }
        if (failure != null && !stopping) {
            LOG.warning(name + ": worker failed: " + failure + (exit == null ? "" : " (exit status " + exit + ")"));
        }
    }
}

package org.tserve.wlm.supervision;

import java.io.IOException;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.apache.logging.log4j.Logger;
import org.apache.logging.log4j.ThreadContext;
import org.tserve.config.Compatibility;
import org.tserve.config.ModelSettings;
import org.tserve.dist.DeviceReservation;
import org.tserve.util.Logging;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.RankDescription;
import org.tserve.wlm.api.WlmException;
import org.tserve.wlm.api.WorkerDescription;
import org.tserve.wlm.api.WorkerState;
import org.tserve.wlm.batching.BatchWriter;
import org.tserve.wlm.batching.InFlightBatch;
import org.tserve.wlm.batching.InFlightTable;
import org.tserve.wlm.batching.ResponseReader;
import org.tserve.wlm.link.BackendLink;
import org.tserve.wlm.protocol.FrameType;

/**
 * Supervises one backend (a worker process, or a torchrun job of several ranks), in the shape of
 * gunicorn's arbiter: one loop of short verbs — spawn, connect, load, serve, reap, back off — until
 * it is stopped. Each verb's work lives in its own class: {@link BackendStarter} (connect, load),
 * {@link BatchWriter} (serve), {@link ResponseReader} (answers), {@link InFlightTable} (batches in
 * flight, response timeouts), {@link RankGroup} (ranks, elastic restarts), {@link RestartBackoff}.
 * A backend that dies or times out fails only the jobs it held. Its part in a job across machines
 * (leader, member) is a {@link NodeRole}.
 *
 * <p>Why past ~400 lines: the loop's verbs share one lifetime's state (process, link, state,
 * failure); split further, each class would reach back into the others' fields.
 */
public final class WorkerThread implements Worker {
    private static final Logger LOG = Logging.logger(WorkerThread.class);
    /** How often the in-flight table is swept for batches past their responseTimeout. */
    static final long SWEEP_MILLIS = 100;
    /** A worker READY this long before it died restarts without delay ({@link RestartBackoff}). */
    static final long SERVED_LONG_ENOUGH_MILLIS = 10_000;

    private final WorkerContext ctx;
    /** Told once when the worker has stopped for good (its scaler frees its ports and devices). */
    private final Consumer<WorkerThread> onStopped;
    private final ServedModel model;
    private final int port;
    private final int gpuId;
    private final String name;
    /** Devices reserved for this worker (held until it stops for good), or null. */
    private final DeviceReservation devices;
    /** Rendezvous port of a torchrun job (0 for a plain worker). */
    private final int rdzvPort;
    private final RankGroup ranks;
    private final InFlightTable inFlight = new InFlightTable();
    /** Requests of the sequences pinned to this worker (stateful models only). */
    private final java.util.concurrent.LinkedBlockingDeque<Job> sequenceQueue;
    private final BatchWriter writer;
    private final ResponseReader reader;
    private final CompletableFuture<Void> firstLoad = new CompletableFuture<>();
    private final CompletableFuture<Void> stopped = new CompletableFuture<>();
    private final CountDownLatch stopSignal = new CountDownLatch(1);
    private volatile WorkerState state = WorkerState.STARTING;
    private volatile boolean stopping;
    private volatile long startTime = System.currentTimeMillis();
    private volatile long readySince;
    /** A restart is under way: the next load ends the recovery (WorkerLog.recovered). */
    private volatile boolean recovering;
    private volatile WorkerProcess process;
    /** Where the current lifetime's start went (describe's {@code startup}). */
    private volatile StartupTimeline startup;
    private volatile BackendLink link;
    private volatile ScheduledFuture<?> sweeper;
    /** Its part in a job across machines (none, leader or member). */
    private final NodeRole role;
    /** Why the last lifetime ended (null: asked to stop), for a member's state. */
    private volatile String lastFailure;

    /** How one process lifetime ended: whether it loaded the model, and why it ended (null: asked to). */
    private record Lifetime(boolean loaded, String failure, int status) {
    }

    public WorkerThread(WorkerContext ctx, ServedModel model, int port, int gpuId, DeviceReservation devices, int rdzvPort,
                        Consumer<WorkerThread> onStopped) {
        this.ctx = ctx;
        this.onStopped = onStopped;
        this.model = model;
        this.port = port;
        this.gpuId = gpuId;
        this.devices = devices;
        this.rdzvPort = rdzvPort;
        this.name = name(port, model);
        this.ranks = new RankGroup(model.dist, devices);
        this.sequenceQueue = new java.util.concurrent.LinkedBlockingDeque<>(model.getSettings().jobQueueSize);
        this.writer = new BatchWriter(model, port, inFlight, this::isStopping, sequenceQueue);
        this.reader = new ResponseReader(model, ctx.events(), name, port, inFlight, this::isStopping,
                writer::dispatchQueued, ctx.maxResponseSize());
        this.role = new NodeRole(model, name, ranks);
    }

    /**
     * Makes this worker the leader (node 0) of a job across machines: its own agent gets node-rank
     * 0 (and is_host for c10d), and {@code members} start the other nodes' ranks.
     */
    void leadNodes(List<MemberClient> members, String localAddr, String leaderAddress) {
        role.lead(members, localAddr, leaderAddress, port);
    }

    /** Makes this worker node {@code nodeRank} of a leader's job: it loads its ranks and serves nothing. */
    public void memberOf(int nodeRank, String localAddr, String jobRunId) {
        role.memberOf(nodeRank, localAddr, jobRunId);
    }

    /** Why the last lifetime failed (null when none did or it was asked to stop). */
    public String getLastFailure() {
        return lastFailure;
    }

    /** Every node of a job across machines for describe (null for a worker on one machine). */
    public com.google.gson.JsonArray describeNodes() {
        return role.describe(state, getPid());
    }

    /** The worker's name in logs and metrics: {@code W-<port>-<model>_<version>}. */
    static String name(int port, ServedModel model) {
        // one line whatever the model says: the name is in every thread name and log line of the worker
        return org.tserve.util.LogText.oneLine("W-" + port + "-" + model.name + "_" + model.version);
    }

    // ---- what the model manager and describe see ----

    DeviceReservation getDevices() {
        return devices;
    }

    int getRdzvPort() {
        return rdzvPort;
    }

    String getName() {
        return name;
    }

    @Override
    public String getId() {
        return String.valueOf(port);
    }

    public int getGpuId() {
        return gpuId;
    }

    @Override
    public WorkerState getState() {
        return state;
    }

    @Override
    public boolean isStopping() {
        return stopping;
    }

    public long getStartTime() {
        return startTime;
    }

    public long getPid() {
        WorkerProcess p = process;
        return p == null ? -1 : p.pid();
    }

    /** The current lifetime's startup steps as describe shows them (null before the first spawn). */
    public String describeStartup() {
        StartupTimeline t = startup;
        return t == null ? null : t.toJson().toString();
    }

    public long getMemoryUsage() {
        WorkerProcess p = process;
        return p == null || !p.isAlive() ? 0 : p.memoryUsage();
    }

    @Override
    public WorkerDescription describe(String pong) {
        com.google.gson.JsonArray nodes = describeNodes();
        return new WorkerDescription(getId(), getStartTime(), getState(), getMemoryUsage(), getPid(), getGpuId() >= 0,
                getGpuId(), getRanks(), pong, nodes == null ? null : nodes.toString(), describeStartup());
    }

    /** The ranks of a distributed worker (empty for a plain one). */
    public List<RankDescription> getRanks() {
        return ranks.describe();
    }

    @Override
    public java.util.concurrent.BlockingDeque<Job> sequenceQueue() {
        return sequenceQueue;
    }

    /** The backend link while this worker serves, else null (a stateful model's SEQUENCE_END goes there). */
    @Override
    public BackendLink servingLink() {
        BackendLink c = link;
        return c != null && c.alive() && state == WorkerState.READY ? c : null;
    }

    long directDispatches() {
        return writer.directDispatches();
    }

    /** See {@link BatchWriter#dispatchQueued}. */
    long chainedDispatches() {
        return writer.chainedDispatches();
    }

    /** See {@link BatchWriter#freeBatches}. */
    @Override
    public int freeBatches() {
        return writer.freeBatches();
    }

    /** See {@link BatchWriter#dispatchNow}. */
    @Override
    public boolean dispatchNow(Job job) {
        return writer.dispatchNow(job);
    }

    /**
     * Asks the backend for its PONG (pipeline stages, pool pids: docs/protocol.md). Completes with
     * the PONG json, or with null when the worker is not serving; concurrent callers share one PING.
     */
    @Override
    public CompletableFuture<String> ping() {
        BackendLink c = link;
        if (c == null || !c.alive() || state != WorkerState.READY) {
            return CompletableFuture.completedFuture(null);
        }
        return c.ping();
    }

    /** Failed and not serving again yet: in restart backoff, or reloading after its first load ended. */
    @Override
    public boolean isDown() {
        WorkerState s = state;
        return s == WorkerState.RESTARTING || s == WorkerState.STARTING && firstLoad.isDone();
    }

    /** Completes when the first model load succeeded; fails with a WlmException when it did not. */
    CompletableFuture<Void> firstLoad() {
        return firstLoad;
    }

    /** Completes when the worker has stopped for good. */
    CompletableFuture<Void> stoppedFuture() {
        return stopped;
    }

    // ---- control ----

    public void start() {
        Thread t = new Thread(this::run, name);
        t.setDaemon(true);
        // One periodic check per worker instead of a timer task per batch: scheduling one woke
        // the timer thread on every request.
        sweeper = ctx.scheduler().scheduleWithFixedDelay(this::sweepTimeouts, SWEEP_MILLIS, SWEEP_MILLIS,
                TimeUnit.MILLISECONDS);
        t.start();
        role.startWatcher(() -> process, () -> link, this::isStopping, stopped::isDone);
    }

    /** Asks the worker to stop: no new batches, in-flight batches finish, then STOP and exit. */
    public void stop() {
        stopping = true;
        stopSignal.countDown();
    }

    /** Kills the backend at once (used when a graceful stop takes too long). */
    void killNow() {
        stop();
        BackendLink c = link;
        if (c != null) {
            c.die("worker killed");
        }
        WorkerProcess p = process;
        if (p != null) {
            p.kill();
        }
    }

    // ---- the supervision loop ----

    private void run() {
        ThreadContext.put(Logging.MODEL, model.name);   // for layouts that print the context (log_format=json)
        ThreadContext.put(Logging.WORKER, name);
        RestartBackoff backoff = new RestartBackoff(System::currentTimeMillis);
        try {
            while (!stopping) {
                Lifetime end = live();
                reap(end);
                if (stopping || role.isMember()) {
                    break;   // a member's job is restarted by its leader, not here
                }
                if (end.loaded()) {
                    backoff.loaded(System.currentTimeMillis() - readySince >= SERVED_LONG_ENOUGH_MILLIS);
                }
                if (!backOff(backoff, end.failure())) {
                    break;
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            retire();
        }
    }

    /** One process lifetime, its failures turned into how it ended. */
    private Lifetime live() {
        try {
            spawnAndServe();
            BackendLink c = link;
            String lost = role.nodeFailure();
            return new Lifetime(true, lost != null ? lost : c == null ? null : c.deadReason(), 500);
        } catch (WorkerFailure e) {
            return ended(e.getMessage(), e.status);
        } catch (IOException e) {
            return ended("I/O error talking to the worker: " + e.getMessage(), 500);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return ended("interrupted", 500);
        } catch (RuntimeException e) {
            LOG.error(name + ": unexpected error", e);
            return ended("unexpected frontend error: " + e, 500);
        }
    }

    private Lifetime ended(String failure, int status) {
        String lost = role.nodeFailure();
        return new Lifetime(state == WorkerState.READY, lost != null ? lost : failure, lost != null ? 500 : status);
    }

    /**
     * Spawns the backend, then connects, loads and serves until it stops or dies. A torchrun job
     * whose rank died while torch.distributed.elastic restarts the group is reconnected and
     * reloaded within the same lifetime (the agent keeps running).
     */
    private void spawnAndServe() throws WorkerFailure, IOException, InterruptedException {
        spawn();
        while (true) {
            BackendLink c = connectAndLoad();
            ready();
            if (role.isMember()) {
                follow(c);
            } else {
                writer.serve(c);
            }
            if (stopping) {
                if (c.alive()) {
                    drainAndStop(c);
                }
                return;
            }
            if (!elasticRestart(c)) {
                return;
            }
        }
    }

    private void spawn() throws WorkerFailure, IOException {
        state = WorkerState.STARTING;
        startTime = System.currentTimeMillis();
        ranks.reset("STARTING");
        link = null;
        startup = new StartupTimeline(name);
        role.newRun();
        process = WorkerProcess.start(ctx.env(), model, port, name, devices, rdzvPort,
                role.launchDist(), role.runId());
        role.lifetimeStarted();
    }

    /**
     * A member node's ranks take no requests from here (rank 0 on the leader feeds them): hold
     * them until asked to stop, a rank closes its connection or the agent exits.
     */
    private void follow(BackendLink c) throws InterruptedException {
        while (!stopping && c.alive() && process.isAlive()) {
            stopSignal.await(100, TimeUnit.MILLISECONDS);
        }
        if (!stopping && !process.isAlive()) {
            c.die("torchrun agent of node exited with status " + process.exitStatus());
        }
    }

    private BackendLink connectAndLoad() throws WorkerFailure, IOException, InterruptedException {
        ModelSettings s = model.getSettings();
        long deadline = System.currentTimeMillis() + s.startupTimeout * 1000L;
        BackendStarter starter = new BackendStarter(model, name, gpuId, ctx.env(), ranks,
                this::isStopping);
        BackendLink c = starter.connect(process, port, deadline, s);
        StartupTimeline t = startup;
        t.connected();
        link = c;
        reader.start(c, t::batchAnswered);
        starter.load(c, process, deadline, s);
        t.loaded(c.loadReplies.get(0).join().text());   // rank 0's LOADED: load() checked it arrived
        role.checkLeaderRanksFirst();
        return c;
    }

    private void ready() {
        readySince = System.currentTimeMillis();
        role.formed();
        state = WorkerState.READY;
        ranks.mark("READY");
        int restarts = ranks.elasticRestarts();
        if (recovering) {
            recovering = false;
            WorkerLog.recovered(name);
        }
        LOG.info(name + ": model " + model.name + " version " + model.version + " loaded by worker pid "
                + process.pid() + (restarts > 0 ? " after elastic restart " + restarts : " " + startup.ready()));
        ctx.events().onWorkerLoaded(model.name, model.version, name, System.currentTimeMillis() - startTime);
        firstLoad.complete(null);
    }

    /**
     * After a rank's connection closed: if the torchrun agent lives and has restarts left, fail
     * the in-flight jobs saying so and return true (the caller reconnects to the restarted
     * ranks); else return false and let the worker restart with the normal backoff.
     */
    private boolean elasticRestart(BackendLink c) {
        int dead = c.deadRank();
        if (!model.dist.usesTorchrun() || dead < 0 || role.restartsWholeJob()) {
            // across machines (static mode) the leader restarts the whole job (every node) itself
            return false;
        }
        String who = "rank " + dead + " of worker " + port;
        if (role.dynamic()) {
            if (!process.isAlive()) {
                c.explainDeath(who + " died and the torchrun agent exited (status " + process.exitStatus()
                        + ", max-restarts " + role.launchDist().maxRestarts + "): the worker is restarted");
                return false;
            }
            ranks.reform();
            String lost = role.nodeFailure();
            String msg = (lost != null ? lost + "; " : who + " ended; ")
                    + "torchrun re-forms the job with the nodes that are there (re-form " + ranks.elasticRestarts() + ")";
            LOG.warn(name + ": " + msg);
            state = WorkerState.STARTING;
            inFlight.failAll(500, msg);
            return true;
        }
        if (!ranks.tryElasticRestart(dead, process.isAlive())) {
            c.explainDeath(who + " died; torchrun has no restarts left (max-restarts " + ranks.maxRestarts()
                    + "): the worker is restarted");
            return false;
        }
        String msg = who + " died; torchrun is restarting the ranks (restart " + ranks.elasticRestarts() + " of "
                + ranks.maxRestarts() + ")";
        LOG.warn(name + ": " + msg);
        state = WorkerState.STARTING;
        inFlight.failAll(500, msg);
        return true;
    }

    /** Graceful stop: waits (bounded by responseTimeout) for the batches in flight, then STOP. */
    private void drainAndStop(BackendLink c) throws InterruptedException {
        c.awaitIdle(System.currentTimeMillis() + model.getSettings().responseTimeout * 1000L);
        try {
            c.write(FrameType.STOP, 0, new byte[0], true);
        } catch (IOException ignored) {
            // the worker is gone already
        }
        c.die("worker stopped");
        process.stop(3000);
    }

    /** Ends the lifetime: closes the link, stops the process, fails what it held, reports a failed first load. */
    private void reap(Lifetime end) {
        String failure = end.failure();
        lastFailure = stopping ? null : failure;
        role.lifetimeEnded();
        BackendLink c = link;
        if (c != null) {
            c.die(failure == null ? "worker stopped" : failure);
        }
        WorkerProcess p = process;
        Integer exit = null;
        if (p != null) {
            p.stop(!stopping && failure != null ? 1000 : 3000);
            exit = p.exitStatus();
            p.drainLogs(300);
        }
        if (!inFlight.isEmpty()) {
            String msg = "Worker died. (worker " + port + " of model " + model.name
                    + (exit == null ? "" : " exited with status " + exit) + (failure == null ? "" : ": " + failure) + ")";
            if (inFlight.failAll(500, msg) > 0) {
                LOG.warn(name + ": " + msg);
            }
        }
        model.workerEnded(this, failure == null ? "stopped" : failure);   // e.g. the handler's sequence state is gone
        if (failure != null && !stopping) {
            WorkerLog.workerFailed(name, failure, exit, end.loaded());
        }
        if (!firstLoad.isDone()) {
            firstLoad.completeExceptionally(new WlmException(end.status() == 200 ? 500 : end.status(),
                    failure == null ? "worker stopped before loading the model" : failure));
        }
    }

    /** Waits before the next spawn; false when the worker gives up or is stopped meanwhile. */
    private boolean backOff(RestartBackoff backoff, String failure) throws InterruptedException {
        boolean first = backoff.recoveryStart() == 0;
        int delay = backoff.nextDelaySeconds(model.getSettings().maxRetryTimeoutInSec);
        if (first) {
            LOG.info(name + ": Auto recovery start timestamp: " + backoff.recoveryStart());
        }
        if (delay < 0) {
            LOG.error(name + ": Auto recovery failed again; worker gives up after maxRetryTimeoutInSec="
                    + model.getSettings().maxRetryTimeoutInSec + " s");
            return false;
        }
        state = WorkerState.RESTARTING;
        ranks.mark("RESTARTING");
        recovering = true;
        WorkerLog.retry(name, port, delay, failure);
        return !stopSignal.await(delay, TimeUnit.SECONDS);
    }

    /** The worker has stopped for good: devices and ports are free once stoppedFuture() completes. */
    private void retire() {
        state = WorkerState.STOPPED;
        ranks.mark("STOPPED");
        if (!firstLoad.isDone()) {
            firstLoad.completeExceptionally(new WlmException(500, "worker stopped before loading the model"));
        }
        ScheduledFuture<?> sw = sweeper;
        if (sw != null) {
            sw.cancel(false);
        }
        onStopped.accept(this);
        stopped.complete(null);
    }

    // ---- response timeouts ----

    /** Answers 504 for every batch past its responseTimeout and restarts the backend that held it. */
    private void sweepTimeouts() {
        model.sweep();
        for (InFlightBatch b : inFlight.takeExpired()) {
            String msg = "Model \"" + model.name + "\" did not answer within its responseTimeout of " + b.timeoutSec
                    + " s; worker " + port + " is restarted";
            WorkerLog.responseTimeout(name, msg, inFlight.timeoutsInARow());
            Compatibility policy = Compatibility.current();
            for (Job j : b.jobs) {
                j.fail(policy.responseTimeoutStatus(), policy.responseTimeoutMessage(msg));
            }
            b.link.die("response timeout after " + b.timeoutSec + " s");
            b.link.permits.release();   // after die: a request answered by the 504 must not go to this link
            WorkerProcess p = process;
            if (p != null) {
                p.kill();
            }
        }
    }
}

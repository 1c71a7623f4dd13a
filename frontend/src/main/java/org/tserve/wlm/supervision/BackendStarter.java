package org.tserve.wlm.supervision;

import java.io.IOException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;
import org.tserve.config.ModelSettings;
import org.tserve.wlm.batching.InFlightTable;
import org.tserve.wlm.link.BackendLink;
import org.tserve.wlm.link.BackendStatus;
import org.tserve.wlm.link.RankConnection;
import org.tserve.wlm.protocol.Frame;
import org.tserve.wlm.protocol.FrameType;

/**
 * Brings a spawned backend to READY: connects to each rank's socket while the process lives, then
 * sends LOAD to every rank and checks each LOADED answer, all within startupTimeout. Failures
 * become a {@link WorkerFailure} whose message names the rank and carries the worker's last output.
 */
final class BackendStarter {
    private final ServedModel model;
    private final String name;
    private final int gpuId;
    private final WorkerEnvironment env;
    private final RankGroup ranks;
    private final BooleanSupplier stopping;

    BackendStarter(ServedModel model, String name, int gpuId, WorkerEnvironment env, RankGroup ranks, BooleanSupplier stopping) {
        this.model = model;
        this.name = name;
        this.gpuId = gpuId;
        this.env = env;
        this.ranks = ranks;
        this.stopping = stopping;
    }

    /** Connects to ranks listening from {@code basePort} on (one port or socket per rank). */
    BackendLink connect(WorkerProcess process, int basePort, long deadline, ModelSettings s)
            throws WorkerFailure, InterruptedException {
        RankConnection[] conns = new RankConnection[ranks.sockets()];
        try {
            for (int r = 0; r < conns.length; r++) {
                conns[r] = connectRank(process, basePort + r, deadline, s.startupTimeout);
            }
        } catch (WorkerFailure | InterruptedException e) {
            for (RankConnection c : conns) {
                if (c != null) {
                    c.close();
                }
            }
            throw e;
        }
        return new BackendLink(conns, s.inFlightLimit());
    }

    private RankConnection connectRank(WorkerProcess p, int port, long deadline, int timeoutSec)
            throws WorkerFailure, InterruptedException {
        while (true) {
            if (!p.isAlive()) {
                p.drainLogs(500);
                throw new WorkerFailure(500, "Worker process exited with status " + p.exitStatus()
                        + " before it was ready: " + p.lastErrorLines(8));
            }
            if (stopping.getAsBoolean()) {
                throw new WorkerFailure(503, "worker stopped while starting");
            }
            RankConnection c;
            try {
                c = RankConnection.tryOpen(env.useTcp, port, WorkerProcess.socketPath(env, port));
            } catch (IOException e) {
                throw new WorkerFailure(500, "Worker " + name + ": " + e.getMessage());
            }
            if (c != null) {
                return c;
            }
            if (System.currentTimeMillis() > deadline) {
                WorkerLog.startupTimeout(name);
                throw new WorkerFailure(500, "Worker did not start listening on " + (env.useTcp ? "port " : "socket ")
                        + port + " within startupTimeout " + timeoutSec + " s: " + p.lastErrorLines(5));
            }
            Thread.sleep(20);
        }
    }

    /** Sends LOAD to every rank and waits for each rank's LOADED (the link's readers complete them). */
    void load(BackendLink link, WorkerProcess process, long deadline, ModelSettings s)
            throws WorkerFailure, IOException, InterruptedException {
        link.write(FrameType.LOAD, InFlightTable.LOAD_BATCH_ID, LoadMessage.body(model, name, gpuId, env, s), true);
        for (int rank = 0; rank < link.rankCount(); rank++) {
            checkLoaded(link, process, rank, deadline, s);
        }
    }

    private void checkLoaded(BackendLink link, WorkerProcess process, int rank, long deadline, ModelSettings s)
            throws WorkerFailure, InterruptedException {
        String who = link.rankCount() > 1 ? " (rank " + rank + ")" : "";
        Frame f;
        try {
            f = link.loadReplies.get(rank).get(Math.max(1, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            WorkerLog.startupTimeout(name);
            throw new WorkerFailure(500, "Worker" + who + " did not load the model within startupTimeout "
                    + s.startupTimeout + " s");
        } catch (ExecutionException e) {
            process.stop(2000);
            process.drainLogs(500);
            throw new WorkerFailure(500, "Worker" + who + " closed the connection while loading (exit status "
                    + process.exitStatus() + "): " + process.lastErrorLines(8));
        }
        BackendStatus answer = BackendStatus.parse(f.text());
        int status = answer.status();
        String message = answer.readable() ? answer.message()
                : "unreadable " + FrameType.name(f.type) + " answer: " + f.text();
        if (f.type == FrameType.LOADED && status == 200) {
            if (!model.dist.usesTorchrun()) {
                // a warm-started plain worker's own pid; a torchrun job's pid stays the agent's
                process.noteWorkerPid(BackendStatus.pidOf(f.text()));
            }
            long pid = ranks.noteLoaded(rank, f.text());
            if (rank == 0 && ranks.firstGlobalRank() >= 0) {
                process.setRankOffset(ranks.firstGlobalRank());
            }
            if (pid > 0 && model.dist.usesTorchrun()) {
                process.noteRankEnvironment(ProcessTree.environ(pid));
            }
            return;
        }
        process.drainLogs(300);
        String tail = process.lastErrorLines(5);
        WorkerLog.loadFailed(name, model.name, "model load failed" + who + " (" + status + "): " + message
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

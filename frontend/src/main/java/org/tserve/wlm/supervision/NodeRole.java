package org.tserve.wlm.supervision;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.apache.logging.log4j.Logger;
import org.tserve.dist.TorchrunOptions;
import org.tserve.util.Logging;
import org.tserve.wlm.api.RankDescription;
import org.tserve.wlm.api.WorkerState;
import org.tserve.wlm.link.BackendLink;
import org.tserve.wlm.supervision.RankGroup;
import org.tserve.wlm.supervision.WorkerFailure;
import org.tserve.wlm.supervision.WorkerProcess;
import org.tserve.wlm.supervision.WorkerThread;

/**
 * The part one worker plays in a job across machines (docs/distributed.md): none (the job runs on
 * this machine), leader (node 0: its rank 0 serves, {@link RemoteNodes} start the member nodes'
 * ranks, a watcher polls them) or member (node N of a leader's job: loads its ranks, serves
 * nothing). {@link WorkerThread} asks it how to launch, and tells it when a lifetime starts and
 * ends; which node failed is kept here.
 */
public final class NodeRole {
    private static final Logger LOG = Logging.logger(NodeRole.class);
    /** How often the leader polls its member nodes. */
    private static final long WATCH_MILLIS = 500;

    private final ServedModel model;
    private final String workerName;
    private final RankGroup ranks;
    /** This node's torchrun options ({@link TorchrunOptions#forNode} for a job across machines). */
    private volatile TorchrunOptions launchDist;
    /** The run id every node of the job shares (null: the single-node default); new for each lifetime on a leader. */
    private volatile String runId;
    /** The leader's job id ({@code <model>_<version>_<port>}): its members' parts keep it across lifetimes. */
    private volatile String jobId;
    /** Lifetimes this leader started, for unique run ids. */
    private int lifetimes;
    private volatile boolean member;
    /** The member nodes, on a leader (null otherwise). */
    private volatile RemoteNodes remote;
    /** Why the job lost a node (named), set by the watcher; null while every node is fine. */
    private volatile String nodeFailure;
    /** Whether the member nodes run their part of the current lifetime (the watcher polls them then). */
    private volatile boolean nodesStarted;

    public NodeRole(ServedModel model, String workerName, RankGroup ranks) {
        this.model = model;
        this.workerName = workerName;
        this.ranks = ranks;
        this.launchDist = model.dist;
    }

    /** Node 0 of a job across machines: its agent gets node-rank 0, {@code members} start the other nodes. */
    public void lead(List<MemberClient> members, String localAddr, String leaderAddress, int port) {
        launchDist = model.dist.forNode(0, localAddr);
        jobId = model.name + "_" + model.version + "_" + port;
        runId = jobId;
        remote = new RemoteNodes(members, model, jobId, leaderAddress);
    }

    /**
     * A leader is about to spawn a lifetime: a fresh run id. torchrun closes an etcd rendezvous
     * for good when its agent exits, so a run id used before (a restarted worker, or a restarted
     * leader registering the model again) would only ever get RendezvousClosedError.
     */
    public void newRun() {
        if (remote != null) {
            lifetimes++;
            runId = jobId + "_" + Long.toString(System.currentTimeMillis(), 36) + lifetimes;
        }
    }

    /** Node {@code nodeRank} of a leader's job: loads its ranks and serves nothing. */
    public void memberOf(int nodeRank, String localAddr, String jobRunId) {
        launchDist = model.dist.forNode(nodeRank, localAddr);
        runId = jobRunId;
        member = true;
        ranks.setNodeRank(nodeRank);
    }

    public TorchrunOptions launchDist() {
        return launchDist;
    }

    public String runId() {
        return runId;
    }

    public boolean isMember() {
        return member;
    }

    boolean isLeader() {
        return remote != null;
    }

    /** Across machines with an etcd rendezvous: torchrun re-forms the job when a node goes (elastic). */
    public boolean dynamic() {
        return (remote != null || member) && launchDist.dynamicRendezvous();
    }

    /** Across machines with a static rendezvous: the leader restarts the whole job itself. */
    public boolean restartsWholeJob() {
        return (remote != null || member) && !dynamic();
    }

    /** Why the job lost a node, or null. */
    public String nodeFailure() {
        return nodeFailure;
    }

    /** A lifetime begins: the member nodes start their ranks. */
    public void lifetimeStarted() throws WorkerFailure {
        nodeFailure = null;
        RemoteNodes r = remote;
        if (r != null) {
            r.start(runId);
            nodesStarted = true;
        }
    }

    /** A lifetime ended: the member nodes stop theirs. */
    public void lifetimeEnded() {
        RemoteNodes r = remote;
        if (r != null) {
            nodesStarted = false;
            r.stopAll();
        }
    }

    /** The job (re-)formed and loaded: with etcd, the nodes that are there are the job now. */
    public void formed() {
        if (dynamic()) {
            nodeFailure = null;
        }
    }

    /** On a leader, its first rank must be the job's rank 0, which drives every step. */
    public void checkLeaderRanksFirst() throws WorkerFailure {
        if (remote != null && ranks.firstGlobalRank() > 0) {
            // etcd orders nodes by address
            throw new WorkerFailure(500, "the leader's first rank came out as global rank " + ranks.firstGlobalRank()
                    + " of the job: torchrun ordered another node first; with an etcd rendezvous nodes are sorted by "
                    + "address, so the leader's cluster_address must sort first");
        }
    }

    /** Every node of the job for describe (null for a worker on one machine). */
    public JsonArray describe(WorkerState state, long pid) {
        RemoteNodes r = remote;
        if (r == null) {
            return null;
        }
        JsonArray out = new JsonArray();
        JsonObject leader = new JsonObject();
        leader.addProperty("node", 0);
        leader.addProperty("address", "leader");
        leader.addProperty("state", state.name());
        leader.addProperty("pid", pid);
        JsonArray rs = new JsonArray();
        for (RankDescription d : ranks.describe()) {
            rs.add(d.toJson());
        }
        leader.add("ranks", rs);
        out.add(leader);
        out.addAll(r.describe());
        return out;
    }

    /** Starts the leader's watcher thread (nothing for other roles); it ends when {@code stopped} says so. */
    public void startWatcher(Supplier<WorkerProcess> process, Supplier<BackendLink> link, BooleanSupplier stopping,
                      BooleanSupplier stopped) {
        if (remote == null) {
            return;
        }
        Thread watcher = new Thread(() -> watch(process, link, stopping, stopped), workerName + "-nodes");
        watcher.setDaemon(true);
        watcher.start();
    }

    /**
     * Polls the member nodes while the job runs. Static mode: a lost node ends the lifetime (the
     * batches in flight fail naming the node) and the whole job restarts on every node with the
     * backoff. Dynamic mode (etcd): this node's ranks are ended so that torchrun re-forms the job
     * with the nodes that are left, and the lost node is asked to rejoin until it does.
     */
    private void watch(Supplier<WorkerProcess> process, Supplier<BackendLink> link, BooleanSupplier stopping,
                       BooleanSupplier stopped) {
        while (!stopped.getAsBoolean()) {
            try {
                Thread.sleep(WATCH_MILLIS);
            } catch (InterruptedException e) {
                return;
            }
            if (process.get() == null || !nodesStarted) {
                continue;
            }
            if (dynamic() && !stopping.getAsBoolean()) {
                remote.rejoin(runId);
            }
            // polled also while a failure or a stop is handled: the polls are the members'
            // heartbeat of this leader (MemberJobs.LEADER_SILENCE_MILLIS)
            String lost = remote.check();
            if (lost == null || nodeFailure != null || stopping.getAsBoolean() || !nodesStarted) {
                continue;
            }
            nodeFailure = lost;
            BackendLink c = link.get();
            if (dynamic()) {
                LOG.warn(workerName + ": " + lost + "; torchrun re-forms the job without it");
                // SIGKILL first, the link after: a rank whose connection closes first exits 0,
                // which torchrun takes for a finished job (no re-form)
                for (long pid : ranks.loadedPids()) {
                    ProcessHandle.of(pid).ifPresent(this::killAndWait);
                }
                if (c != null) {
                    c.die(lost, 0);
                }
                continue;
            }
            LOG.warn(workerName + ": " + lost + "; the job restarts on every node");
            if (c != null) {
                c.die(lost);
            }
            WorkerProcess p = process.get();
            if (p != null) {
                p.kill();
            }
        }
    }

    private void killAndWait(ProcessHandle h) {
        h.destroyForcibly();
        try {
            h.onExit().get(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (ExecutionException | TimeoutException e) {
            LOG.warn(workerName + ": rank pid " + h.pid() + " did not exit within 5 s of SIGKILL");
        }
    }
}

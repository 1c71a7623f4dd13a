package org.tserve.wlm.supervision;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.logging.log4j.Logger;
import org.tserve.config.ModelSettings;
import org.tserve.util.Logging;
import org.tserve.wlm.supervision.MemberClient.MemberException;
import org.tserve.wlm.supervision.WorkerFailure;

/**
 * The member nodes of one leader worker whose torchrun job spans machines (node ranks 1..n-1;
 * the leader is node 0): starts their part of the job, watches their state, stops them. Every
 * failure names the node and its address. The ranks' traffic never passes through here: each
 * member's frontend loads its own ranks, and rank 0 (on the leader) feeds them over the process
 * group.
 */
final class RemoteNodes {
    private static final Logger LOG = Logging.logger(RemoteNodes.class);
    /** Consecutive unanswered polls after which a member counts as lost. */
    static final int UNREACHABLE_POLLS = 3;
    /** How often a lost member is asked to rejoin an elastic (etcd) job. */
    static final long REJOIN_MILLIS = 3000;

    private final List<MemberClient> members;
    private final ServedModel model;
    private final String jobId;
    private final String leader;
    private final boolean[] started;
    private final JsonObject[] lastState;
    private final int[] unanswered;
    private final long[] lastRejoin;

    RemoteNodes(List<MemberClient> members, ServedModel model, String jobId, String leader) {
        this.members = members;
        this.model = model;
        this.jobId = jobId;
        this.leader = leader;
        this.started = new boolean[members.size()];
        this.lastState = new JsonObject[members.size()];
        this.unanswered = new int[members.size()];
        this.lastRejoin = new long[members.size()];
    }

    String jobId() {
        return jobId;
    }

    private String node(int i) {
        return "node " + (i + 1) + " (" + members.get(i).address + ")";
    }

    /** What a member needs to start its part: the archive, the distributed settings, its node rank. */
    JsonObject spec(int nodeRank, String runId) {
        ModelSettings s = model.getSettings();
        JsonObject o = new JsonObject();
        o.addProperty("job", jobId);
        o.addProperty("runId", runId);
        o.addProperty("leader", leader);
        o.addProperty("url", model.getArchive().getUrl());
        o.addProperty("modelName", model.name);
        o.addProperty("modelVersion", model.version);
        o.addProperty("handler", model.handler);
        o.addProperty("nodeRank", nodeRank);
        JsonObject settings = new JsonObject();
        settings.addProperty("parallelType", s.parallelType);
        settings.addProperty("parallelLevel", s.parallelLevel);
        settings.addProperty("deviceType", s.deviceType);
        settings.addProperty("startupTimeout", s.startupTimeout);
        // deviceIds stay each node's own (its config.properties models entry, or its archive)
        settings.add("torchrun", new com.google.gson.Gson().toJsonTree(model.dist.toMap()));
        o.add("settings", settings);
        return o;
    }

    /**
     * Starts every member's part of the job (in parallel); when one refuses or cannot be reached,
     * stops the ones that started and throws naming that node.
     */
    void start(String runId) throws WorkerFailure {
        List<CompletableFuture<JsonObject>> calls = new ArrayList<>();
        for (int i = 0; i < members.size(); i++) {
            int n = i;
            unanswered[n] = 0;
            lastState[n] = null;
            calls.add(CompletableFuture.supplyAsync(() -> {
                try {
                    return members.get(n).start(spec(n + 1, runId), Duration.ofSeconds(60));
                } catch (MemberException e) {
                    throw new java.util.concurrent.CompletionException(e);
                }
            }));
        }
        WorkerFailure failure = null;
        for (int i = 0; i < calls.size(); i++) {
            try {
                lastState[i] = calls.get(i).join();
                started[i] = true;
            } catch (java.util.concurrent.CompletionException e) {
                Throwable c = e.getCause();
                int status = c instanceof MemberException ? ((MemberException) c).status : 500;
                if (failure == null) {
                    failure = new WorkerFailure(status >= 400 ? status : 500, node(i) + " cannot start its ranks: "
                            + c.getMessage());
                }
            }
        }
        if (failure != null) {
            stopAll();
            throw failure;
        }
    }

    /**
     * Polls every started member once. Returns why the job is lost (naming the node), or null
     * while every member's ranks are starting or ready. In an elastic (etcd) job the lost member
     * is then asked to rejoin ({@link #rejoin}).
     */
    String check() {
        for (int i = 0; i < members.size(); i++) {
            if (!started[i]) {
                continue;
            }
            String lost = lost(i);
            if (lost != null) {
                JsonObject st = new JsonObject();
                st.addProperty("state", "LOST");
                st.addProperty("failure", lost);
                lastState[i] = st;
                if (model.dist.dynamicRendezvous()) {
                    started[i] = false;
                    lastRejoin[i] = System.currentTimeMillis();
                }
                return lost;
            }
        }
        return null;
    }

    /**
     * An elastic (etcd) job: asks every member that is not part of it to start its part again
     * (every {@link #REJOIN_MILLIS}); its agent joins the rendezvous and torchrun re-forms the job.
     */
    void rejoin(String runId) {
        long now = System.currentTimeMillis();
        for (int i = 0; i < members.size(); i++) {
            if (started[i] || now - lastRejoin[i] < REJOIN_MILLIS) {
                continue;
            }
            lastRejoin[i] = now;
            try {
                lastState[i] = members.get(i).start(spec(i + 1, runId), Duration.ofSeconds(30));
                unanswered[i] = 0;
                started[i] = true;
                LOG.info("job " + jobId + ": " + node(i) + " rejoins");
            } catch (MemberException e) {
                LOG.debug("job " + jobId + ": " + node(i) + " cannot rejoin yet: " + e.getMessage());
            }
        }
    }

    /** Why member {@code i} counts as lost now, or null. */
    private String lost(int i) {
        JsonObject st;
        try {
            st = members.get(i).state(jobId, Duration.ofSeconds(2));
        } catch (MemberException e) {
            if (e.status == 404) {
                return node(i) + " lost: it no longer runs job " + jobId;
            }
            return ++unanswered[i] >= UNREACHABLE_POLLS ? node(i) + " lost: " + e.getMessage() : null;
        }
        unanswered[i] = 0;
        lastState[i] = st;
        String state = st.has("state") ? st.get("state").getAsString() : "";
        if (state.equals("FAILED") || state.equals("STOPPED")) {
            String why = st.has("failure") && !st.get("failure").isJsonNull() ? st.get("failure").getAsString()
                    : "its ranks stopped";
            return node(i) + " lost: " + why;
        }
        return null;
    }

    /** Stops the members' parts (in parallel, bounded); failures are logged, not thrown. */
    void stopAll() {
        List<CompletableFuture<Void>> calls = new ArrayList<>();
        for (int i = 0; i < members.size(); i++) {
            if (!started[i]) {
                continue;
            }
            int n = i;
            started[n] = false;
            calls.add(CompletableFuture.runAsync(() -> {
                try {
                    lastState[n] = members.get(n).stop(jobId, Duration.ofSeconds(60));
                } catch (MemberException e) {
                    LOG.warn("job " + jobId + ": could not stop " + node(n) + ": " + e.getMessage());
                }
            }));
        }
        for (CompletableFuture<Void> c : calls) {
            c.join();
        }
    }

    /** The members for describe: node rank, address, state, agent pid and ranks as last polled. */
    JsonArray describe() {
        JsonArray out = new JsonArray();
        for (int i = 0; i < members.size(); i++) {
            JsonObject n = new JsonObject();
            n.addProperty("node", i + 1);
            n.addProperty("address", members.get(i).address);
            JsonObject st = lastState[i];
            if (st == null) {
                n.addProperty("state", "UNKNOWN");
            } else {
                for (String k : new String[] {"state", "pid", "failure", "ranks"}) {
                    JsonElement e = st.get(k);
                    if (e != null && !e.isJsonNull()) {
                        n.add(k, e.deepCopy());
                    }
                }
            }
            out.add(n);
        }
        return out;
    }
}

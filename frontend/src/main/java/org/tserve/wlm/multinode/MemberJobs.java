package org.tserve.wlm.multinode;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.logging.log4j.Logger;
import org.tserve.archive.ArchiveException;
import org.tserve.archive.ModelArchive;
import org.tserve.archive.ModelLocator;
import org.tserve.config.ConfigException;
import org.tserve.config.ConfigManager;
import org.tserve.config.ModelSettings;
import org.tserve.util.Logging;
import org.tserve.wlm.api.ClusterMember;
import org.tserve.wlm.api.RankDescription;
import org.tserve.wlm.api.RegisterRequest;
import org.tserve.wlm.api.WlmException;
import org.tserve.wlm.api.WorkerState;
import org.tserve.wlm.registry.Model;
import org.tserve.wlm.registry.ModelFactory;
import org.tserve.wlm.supervision.WorkerScaler;
import org.tserve.wlm.supervision.WorkerThread;

/**
 * A member node's parts of its leader's jobs (docs/distributed.md, "Across machines"): for each,
 * the archive found here (this node's model store and allowed_urls), this node's ports and
 * devices, and one torchrun agent for the local ranks, which a worker in member mode loads and
 * holds. Nothing here serves requests: rank 0 on the leader drives every step.
 */
public final class MemberJobs implements ClusterMember {
    private static final Logger LOG = Logging.logger(MemberJobs.class);

    /**
     * How long a part waits for a call of its leader (it polls every 0.5 s) before it counts the
     * leader as lost and stops its ranks: a SIGKILLed leader never says goodbye.
     */
    static final long LEADER_SILENCE_MILLIS = 8_000;
    /**
     * Before the leader's first poll: its start call to every member (in parallel, up to 60 s,
     * {@link RemoteNodes#start}) must end before it polls any, and a slow member (an archive to
     * download) must not make a fast one give up.
     */
    static final long LEADER_FIRST_POLL_MILLIS = 70_000;

    /**
     * One job's part here; {@code heard} is when its leader last called ({@code polled}: it has
     * polled since the start), {@code lost} why the part was given up.
     */
    private record Part(String id, Model model, WorkerThread worker, int nodeRank, String leader,
                        java.util.concurrent.atomic.AtomicLong heard, java.util.concurrent.atomic.AtomicBoolean polled,
                        java.util.concurrent.atomic.AtomicReference<String> lost) {
    }

    private final ConfigManager cfg;
    private final Path tmpRoot;
    private final ModelLocator locator;
    private final ModelFactory factory;
    private final WorkerScaler scaler;
    private final Map<String, Part> parts = new LinkedHashMap<>();
    private java.util.concurrent.ScheduledExecutorService watchdog;

    public MemberJobs(ConfigManager cfg, Path tmpRoot, WorkerScaler scaler) {
        this.cfg = cfg;
        this.tmpRoot = tmpRoot;
        this.locator = new ModelLocator(cfg.getModelStore(), cfg.allowedUrls(), cfg.getLong("max_download_size"));
        this.factory = new ModelFactory(cfg);
        this.scaler = scaler;
    }

    /** True when this server was started as a member ({@code cluster_leader} / {@code --member-of}). */
    @Override
    public boolean enabled() {
        String leader = cfg.get("cluster_leader");
        return leader != null && !leader.isEmpty();
    }

    /**
     * Starts this node's part of a job from the leader's spec (see {@link RemoteNodes#spec});
     * a part of the same id still running is stopped first (a leader that restarted).
     *
     * @throws WlmException 400 bad spec or settings, 404 archive not here, 409 other version,
     *     507 not enough devices, 503 no ports
     */
    @Override
    public JsonObject start(JsonObject spec) throws WlmException {
        String id = str(spec, "job");
        String url = str(spec, "url");
        int nodeRank = spec.has("nodeRank") ? spec.get("nodeRank").getAsInt() : -1;
        if (id == null || url == null || nodeRank < 1) {
            throw new WlmException(400, "a job needs 'job', 'url' and 'nodeRank' >= 1");
        }
        stop(id);
        ModelArchive archive;
        try {
            ModelLocator.Located loc = locator.locate(url);
            archive = ModelArchive.open(loc.path, tmpRoot, url, loc.downloaded);
        } catch (ArchiveException e) {
            throw new WlmException(e.getStatus(), "archive " + url + " on this node: " + e.getMessage());
        }
        Part part;
        try {
            part = create(id, spec, archive, nodeRank);
        } catch (WlmException | RuntimeException e) {
            archive.delete();
            throw e;
        }
        synchronized (parts) {
            parts.put(id, part);
            if (watchdog == null) {
                watchdog = java.util.concurrent.Executors.newSingleThreadScheduledExecutor(r -> {
                    Thread t = new Thread(r, "member-leader-watch");
                    t.setDaemon(true);
                    return t;
                });
                watchdog.scheduleWithFixedDelay(this::watchLeaders, 500, 500, java.util.concurrent.TimeUnit.MILLISECONDS);
            }
        }
        scaler.start(part.model, part.worker);
        LOG.info("job " + id + ": node " + nodeRank + " of model " + part.model.name + " started for leader "
                + part.leader);
        return describe(part);
    }

    private Part create(String id, JsonObject spec, ModelArchive archive, int nodeRank) throws WlmException {
        RegisterRequest req = new RegisterRequest(str(spec, "url"));
        req.modelName = str(spec, "modelName");
        req.handler = str(spec, "handler");
        Model base = factory.create(req, archive);
        String version = str(spec, "modelVersion");
        if (version != null && !version.equals(base.version)) {
            throw new WlmException(409, "archive " + req.url + " on this node holds version " + base.version
                    + " of model " + base.name + ", the leader runs version " + version);
        }
        ModelSettings s = base.getSettings().copy();
        try {
            Object settings = toJava(spec.get("settings"));
            if (settings instanceof Map) {
                @SuppressWarnings("unchecked")
                Map<String, Object> m = (Map<String, Object>) settings;
                s.apply(m, "the leader's settings", new ArrayList<>());
            }
        } catch (ConfigException e) {
            throw new WlmException(400, e.getMessage());
        }
        s.minWorkers = 1;
        s.maxWorkers = 1;
        Model model;
        try {
            model = new Model(base.name, base.version, base.handler, base.runtime, archive, s, false);
        } catch (ConfigException e) {
            throw new WlmException(400, e.getMessage());
        }
        model.markMemberPart();
        if (!model.dist.usesTorchrun() || model.dist.nnodes <= nodeRank) {
            throw new WlmException(400, "job " + id + ": node rank " + nodeRank + " needs a torchrun model with nnodes > "
                    + nodeRank + " (parallelType " + s.parallelType + ", nnodes " + model.dist.nnodes + ")");
        }
        WorkerThread w = scaler.newWorker(model, s, model.dist, 0, 1);
        w.memberOf(nodeRank, cfg.get("cluster_address"), str(spec, "runId"));
        return new Part(id, model, w, nodeRank, str(spec, "leader"),
                new java.util.concurrent.atomic.AtomicLong(System.currentTimeMillis()),
                new java.util.concurrent.atomic.AtomicBoolean(), new java.util.concurrent.atomic.AtomicReference<>());
    }

    /** This node's part of job {@code id}. */
    @Override
    public JsonObject state(String id) throws WlmException {
        Part p;
        synchronized (parts) {
            p = parts.get(id);
        }
        if (p == null) {
            throw new WlmException(404, "no job " + id + " on this node");
        }
        p.heard.set(System.currentTimeMillis());   // the leader's poll: it is alive
        p.polled.set(true);
        return describe(p);
    }

    /**
     * Stops the ranks of every part whose leader has not called for {@link #LEADER_SILENCE_MILLIS}
     * ({@link #LEADER_FIRST_POLL_MILLIS} before its first poll): it died, or the network between
     * them did; the part stays, FAILED with the reason, until the leader starts it again or
     * deletes it.
     */
    private void watchLeaders() {
        List<Part> silent = new ArrayList<>();
        long now = System.currentTimeMillis();
        synchronized (parts) {
            for (Part p : parts.values()) {
                long allowed = p.polled.get() ? LEADER_SILENCE_MILLIS : LEADER_FIRST_POLL_MILLIS;
                if (p.lost.get() == null && now - p.heard.get() > allowed) {
                    silent.add(p);
                }
            }
        }
        for (Part p : silent) {
            String why = "leader " + p.leader + " lost: no call from it for " + (now - p.heard.get()) / 1000
                    + " s; this node's ranks were stopped";
            p.lost.set(why);
            LOG.warn("job " + p.id + ": node " + p.nodeRank + " of model " + p.model.name + ": " + why);
            p.worker.stop();
            scaler.awaitStopped(p.model, List.of(p.worker));
        }
    }

    /** Every part on this node. */
    @Override
    public JsonArray list() {
        JsonArray out = new JsonArray();
        synchronized (parts) {
            parts.values().forEach(p -> out.add(describe(p)));
        }
        return out;
    }

    /** Stops job {@code id}'s part and waits for its ranks; null when there was none. */
    @Override
    public JsonObject stop(String id) {
        Part p;
        synchronized (parts) {
            p = parts.remove(id);
        }
        if (p == null) {
            return null;
        }
        p.worker.stop();
        scaler.awaitStopped(p.model, List.of(p.worker));
        p.model.getArchive().delete();
        LOG.info("job " + id + ": node " + p.nodeRank + " stopped");
        return describe(p);
    }

    /** Stops every part (server shutdown). */
    public void stopAll() {
        List<String> ids;
        synchronized (parts) {
            ids = new ArrayList<>(parts.keySet());
            if (watchdog != null) {
                watchdog.shutdownNow();
                watchdog = null;
            }
        }
        ids.parallelStream().forEach(this::stop);
    }

    private static JsonObject describe(Part p) {
        WorkerThread w = p.worker;
        JsonObject o = new JsonObject();
        o.addProperty("job", p.id);
        o.addProperty("modelName", p.model.name);
        o.addProperty("modelVersion", p.model.version);
        o.addProperty("nodeRank", p.nodeRank);
        String failure = p.lost.get() != null ? p.lost.get() : w.getLastFailure();
        WorkerState st = w.getState();
        o.addProperty("state", failure != null ? "FAILED" : st.name());
        if (failure != null) {
            o.addProperty("failure", failure);
        }
        o.addProperty("pid", w.getPid());
        JsonArray ranks = new JsonArray();
        for (RankDescription r : w.getRanks()) {
            ranks.add(r.toJson());
        }
        o.add("ranks", ranks);
        return o;
    }

    private static String str(JsonObject o, String key) {
        JsonElement e = o.get(key);
        return e == null || e.isJsonNull() ? null : e.getAsString();
    }

    /** JSON to the maps, lists, strings, booleans and integers model-config.yaml parsing gives. */
    static Object toJava(JsonElement e) {
        if (e == null || e.isJsonNull()) {
            return null;
        }
        if (e.isJsonObject()) {
            Map<String, Object> m = new LinkedHashMap<>();
            e.getAsJsonObject().entrySet().forEach(x -> m.put(x.getKey(), toJava(x.getValue())));
            return m;
        }
        if (e.isJsonArray()) {
            List<Object> l = new ArrayList<>();
            e.getAsJsonArray().forEach(x -> l.add(toJava(x)));
            return l;
        }
        JsonPrimitive p = e.getAsJsonPrimitive();
        if (p.isBoolean()) {
            return p.getAsBoolean();
        }
        if (p.isNumber()) {
            double d = p.getAsDouble();
            return d == Math.rint(d) && Math.abs(d) < Integer.MAX_VALUE ? (Object) (int) d : (Object) d;
        }
        return p.getAsString();
    }
}

package org.tserve.wlm;

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

/**
 * A member node's parts of its leader's jobs (docs/distributed.md, "Across machines"): for each,
 * the archive found here (this node's model store and allowed_urls), this node's ports and
 * devices, and one torchrun agent for the local ranks, which a worker in member mode loads and
 * holds. Nothing here serves requests: rank 0 on the leader drives every step.
 */
public final class MemberJobs {
    private static final Logger LOG = Logging.logger(MemberJobs.class);

    private record Part(String id, Model model, WorkerThread worker, int nodeRank, String leader) {
    }

    private final ConfigManager cfg;
    private final Path tmpRoot;
    private final ModelLocator locator;
    private final ModelFactory factory;
    private final WorkerScaler scaler;
    private final Map<String, Part> parts = new LinkedHashMap<>();

    MemberJobs(ConfigManager cfg, Path tmpRoot, WorkerScaler scaler) {
        this.cfg = cfg;
        this.tmpRoot = tmpRoot;
        this.locator = new ModelLocator(cfg.getModelStore(), cfg.allowedUrls(), cfg.getLong("max_download_size"));
        this.factory = new ModelFactory(cfg);
        this.scaler = scaler;
    }

    /** True when this server was started as a member ({@code cluster_leader} / {@code --member-of}). */
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
        }
        part.model.workers.add(part.worker);
        part.worker.start();
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
        return new Part(id, model, w, nodeRank, str(spec, "leader"));
    }

    /** This node's part of job {@code id}. */
    public JsonObject state(String id) throws WlmException {
        Part p;
        synchronized (parts) {
            p = parts.get(id);
        }
        if (p == null) {
            throw new WlmException(404, "no job " + id + " on this node");
        }
        return describe(p);
    }

    /** Every part on this node. */
    public JsonArray list() {
        JsonArray out = new JsonArray();
        synchronized (parts) {
            parts.values().forEach(p -> out.add(describe(p)));
        }
        return out;
    }

    /** Stops job {@code id}'s part and waits for its ranks; null when there was none. */
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
        String failure = w.getLastFailure();
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

package org.tserve.api;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Map;
import org.tserve.config.ModelKey;
import org.tserve.config.ModelKeys;
import org.tserve.config.ModelSettings;
import org.tserve.wlm.api.ModelDescription;
import org.tserve.wlm.api.ModelList;
import org.tserve.wlm.api.WorkerDescription;

/** TorchServe's describe and list JSON shapes, field order as TorchServe writes them. */
public final class DescribeJson {
    private static final DateTimeFormatter TIME = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")
            .withZone(ZoneOffset.UTC);

    private DescribeJson() {
    }

    public static JsonObject model(ModelDescription d, byte[] customized) {
        ModelSettings s = d.settings();
        JsonObject o = new JsonObject();
        o.addProperty("modelName", d.modelName());
        o.addProperty("modelVersion", d.modelVersion());
        o.addProperty("modelUrl", d.modelUrl());
        o.addProperty("runtime", d.runtime());
        addSettings(o, s, ModelKey.Shown.TORCHSERVE);
        o.addProperty("loadedAtStartup", d.loadedAtStartup());
        addSettings(o, s, ModelKey.Shown.TSERVE);
        JsonArray workers = new JsonArray();
        for (WorkerDescription w : d.workers()) {
            JsonObject wo = new JsonObject();
            wo.addProperty("id", w.id());
            wo.addProperty("startTime", TIME.format(Instant.ofEpochMilli(w.startTimeMillis())));
            wo.addProperty("status", w.state().name());
            wo.addProperty("memoryUsage", w.memoryUsage());
            wo.addProperty("pid", w.pid());
            wo.addProperty("gpu", w.gpu());
            wo.addProperty("gpuUsage", "N/A");
            if (!w.ranks().isEmpty()) {
                // distributed workers: one entry per rank (tserve addition to TorchServe's shape)
                JsonArray ranks = new JsonArray();
                for (org.tserve.wlm.api.RankDescription r : w.ranks()) {
                    ranks.add(r.toJson());
                }
                wo.add("ranks", ranks);
            }
            if (w.nodes() != null) {
                // a job across machines: every node with its ranks (docs/distributed.md)
                wo.add("nodes", org.tserve.util.Json.parse(w.nodes()));
            }
            if (w.startup() != null) {
                // where the worker's latest start went (docs/performance.md "Startup timing")
                wo.add("startup", org.tserve.util.Json.parse(w.startup()));
            }
            addStages(wo, w.pong());
            workers.add(wo);
        }
        o.add("workers", workers);
        JsonObject q = new JsonObject();
        q.addProperty("remainingCapacity", d.queueRemainingCapacity());
        q.addProperty("pendingRequests", d.queuePending());
        o.add("jobQueueStatus", q);
        if (customized != null) {
            String text = new String(customized, StandardCharsets.UTF_8);
            JsonElement meta;
            try {
                meta = org.tserve.util.Json.parse(text);
            } catch (RuntimeException e) {
                meta = new JsonPrimitive(text);
            }
            o.add("customizedMetadata", meta);
        }
        return o;
    }

    /** The settings describe shows in one part, in their declared order (config.ModelKeys). */
    private static void addSettings(JsonObject o, ModelSettings s, ModelKey.Shown part) {
        for (Map.Entry<String, Object> e : ModelKeys.describe(s, part).entrySet()) {
            Object v = e.getValue();
            if (v instanceof Number) {
                o.addProperty(e.getKey(), (Number) v);
            } else if (v instanceof Boolean) {
                o.addProperty(e.getKey(), (Boolean) v);
            } else if (v instanceof Iterable) {
                JsonArray a = new JsonArray();
                ((Iterable<?>) v).forEach(x -> a.add((Number) x));
                o.add(e.getKey(), a);
            } else {
                o.addProperty(e.getKey(), String.valueOf(v));
            }
        }
    }

    /** The worker's batches in flight, pipeline stages and pool pids from its PONG (docs/pipelines.md "Metrics"). */
    private static void addStages(JsonObject wo, String pong) {
        if (pong == null) {
            return;
        }
        try {
            JsonObject p = org.tserve.util.Json.parse(pong).getAsJsonObject();
            for (String key : new String[] {"inFlight", "stages", "poolPids"}) {
                if (p.has(key)) {
                    wo.add(key, p.get(key));
                }
            }
        } catch (RuntimeException e) {
            // an unreadable PONG only costs the stages
        }
    }

    public static JsonObject list(ModelList l) {
        JsonObject o = new JsonObject();
        if (l.nextPageToken() != null) {
            o.addProperty("nextPageToken", l.nextPageToken());
        }
        JsonArray a = new JsonArray();
        for (ModelList.Entry e : l.models()) {
            JsonObject m = new JsonObject();
            m.addProperty("modelName", e.modelName());
            m.addProperty("modelUrl", e.modelUrl());
            a.add(m);
        }
        o.add("models", a);
        return o;
    }
}

package org.tserve.grpc;

import com.google.gson.Gson;
import com.google.gson.GsonBuilder;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.time.Instant;
import java.util.List;
import org.tserve.config.ModelSettings;
import org.tserve.wlm.ModelDescription;
import org.tserve.wlm.ModelList;
import org.tserve.wlm.WorkerDescription;

/**
 * The JSON text the management API answers for describe and list (TorchServe's field names and
 * order, pretty-printed), used as {@code ManagementResponse.msg}.
 */
final class ManagementJson {
    private static final Gson PRETTY = new GsonBuilder().setPrettyPrinting().disableHtmlEscaping().create();

    private ManagementJson() {
    }

    static String list(ModelList l) {
        JsonObject o = new JsonObject();
        if (l.nextPageToken() != null) {
            o.addProperty("nextPageToken", l.nextPageToken());
        }
        JsonArray models = new JsonArray();
        for (ModelList.Entry e : l.models()) {
            JsonObject m = new JsonObject();
            m.addProperty("modelName", e.modelName());
            m.addProperty("modelUrl", e.modelUrl());
            models.add(m);
        }
        o.add("models", models);
        return PRETTY.toJson(o) + "\n";
    }

    /** {@code customized}: the handler's describe answer (JSON text) for the first entry, or null. */
    static String describe(List<ModelDescription> ds, String customized) {
        JsonArray arr = new JsonArray();
        for (ModelDescription d : ds) {
            arr.add(describeOne(d));
        }
        if (customized != null && arr.size() > 0) {
            JsonElement meta;
            try {
                meta = JsonParser.parseString(customized);
            } catch (RuntimeException e) {
                meta = new com.google.gson.JsonPrimitive(customized);
            }
            arr.get(0).getAsJsonObject().add("customizedMetadata", meta);
        }
        return PRETTY.toJson(arr) + "\n";
    }

    private static JsonObject describeOne(ModelDescription d) {
        ModelSettings s = d.settings();
        JsonObject o = new JsonObject();
        o.addProperty("modelName", d.modelName());
        o.addProperty("modelVersion", d.modelVersion());
        o.addProperty("modelUrl", d.modelUrl());
        o.addProperty("runtime", d.runtime());
        o.addProperty("minWorkers", s.minWorkers);
        o.addProperty("maxWorkers", s.maxWorkers);
        o.addProperty("batchSize", s.batchSize);
        o.addProperty("maxBatchDelay", s.maxBatchDelay);
        o.addProperty("responseTimeout", s.responseTimeout);
        o.addProperty("startupTimeout", s.startupTimeout);
        o.addProperty("maxRetryTimeoutInSec", s.maxRetryTimeoutInSec);
        o.addProperty("parallelType", s.parallelType);
        o.addProperty("parallelLevel", s.parallelLevel);
        o.addProperty("deviceType", s.deviceType);
        if (!s.deviceIds.isEmpty()) {
            JsonArray ids = new JsonArray();
            s.deviceIds.forEach(ids::add);
            o.add("deviceIds", ids);
        }
        o.addProperty("loadedAtStartup", d.loadedAtStartup());
        JsonArray workers = new JsonArray();
        for (WorkerDescription w : d.workers()) {
            JsonObject wo = new JsonObject();
            wo.addProperty("id", w.id());
            wo.addProperty("startTime", Instant.ofEpochMilli(w.startTimeMillis()).toString());
            wo.addProperty("status", w.state().name());
            wo.addProperty("memoryUsage", w.memoryUsage());
            wo.addProperty("pid", w.pid());
            wo.addProperty("gpu", w.gpu());
            wo.addProperty("gpuUsage", w.gpu() ? "gpuId::" + w.gpuId() : "N/A");
            workers.add(wo);
        }
        o.add("workers", workers);
        JsonObject q = new JsonObject();
        q.addProperty("remainingCapacity", d.queueRemainingCapacity());
        q.addProperty("pendingRequests", d.queuePending());
        o.add("jobQueueStatus", q);
        return o;
    }
}

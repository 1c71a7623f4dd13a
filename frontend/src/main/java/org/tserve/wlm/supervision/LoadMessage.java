package org.tserve.wlm.supervision;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.tserve.config.ModelSettings;
import org.tserve.config.WorkerSettings;

/**
 * The LOAD message's body (docs/protocol.md): what this worker is (model, archive, handler, device,
 * name) and the model's resolved settings, produced from ModelKeys by {@link WorkerSettings}.
 */
final class LoadMessage {
    private LoadMessage() {
    }

    /** {@code gpuId} ≥ 0: the worker's GPU; its deviceType is then gpu, else cpu (whatever was asked). */
    static byte[] body(ServedModel model, String workerName, int gpuId, WorkerEnvironment env, ModelSettings s) {
        JsonObject j = json(model.name, model.version, model.getArchive().getModelDir().toString(), model.handler,
                workerName, gpuId, env, s);
        return j.toString().getBytes(StandardCharsets.UTF_8);
    }

    static JsonObject json(String modelName, String modelVersion, String modelPath, String handler, String workerName,
                           int gpuId, WorkerEnvironment env, ModelSettings s) {
        JsonObject j = new JsonObject();
        j.addProperty("modelName", modelName);
        j.addProperty("modelVersion", modelVersion);
        j.addProperty("modelPath", modelPath);
        j.addProperty("handler", handler);
        j.addProperty("envelope", env.serviceEnvelope);
        j.addProperty("gpuId", gpuId);
        j.addProperty("limitMaxImagePixels", env.limitMaxImagePixels);
        j.addProperty("workerName", workerName);
        for (Map.Entry<String, JsonElement> e : WorkerSettings.toJson(s).entrySet()) {
            j.add(e.getKey(), e.getValue());
        }
        // the device this worker got, not the one asked for (a gpu model on a host without one runs on cpu)
        j.addProperty("deviceType", gpuId >= 0 ? "gpu" : "cpu");
        return j;
    }
}

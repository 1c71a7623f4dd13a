package org.tserve.config;

import com.google.gson.Gson;
import com.google.gson.JsonObject;

/**
 * The model settings a worker gets in LOAD: every {@link ModelKeys} entry sent to the worker
 * ({@link ModelKey#forWorker()}), under its model-config.yaml name, at its resolved value. The
 * worker reads them into one typed object (ts/generated/model_settings.py, written from the same
 * table by {@link PythonKeys}), so no field list is kept by hand on either side.
 */
public final class WorkerSettings {
    private static final Gson GSON = new Gson();

    private WorkerSettings() {
    }

    /** {@code s}'s worker-facing settings as LOAD's fields, in declaration order. */
    public static JsonObject toJson(ModelSettings s) {
        JsonObject j = new JsonObject();
        for (ModelKey<?> k : ModelKeys.all()) {
            if (k.forWorker()) {
                j.add(k.name, GSON.toJsonTree(k.workerValue(s)));
            }
        }
        return j;
    }
}

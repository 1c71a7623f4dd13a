package org.tserve.config;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * config.properties' {@code model_snapshot}: the models, versions, default versions and scale a
 * server starts with, in TorchServe's format (what its config snapshots hold and what KServe's
 * TorchServe runtime writes): {@code {"name", "modelCount", "created", "models": {name: {version:
 * {"defaultVersion", "marName", "minWorkers", "maxWorkers", "batchSize", "maxBatchDelay",
 * "responseTimeout", "startupTimeout", "runtimeType"}}}}}.
 */
public final class ModelSnapshot {
    private static final String KEY = "model_snapshot";
    private static final Set<String> INT_KEYS = Set.of("minWorkers", "maxWorkers", "batchSize", "maxBatchDelay",
            "responseTimeout", "startupTimeout", "parallelLevel");

    /** One model version of the snapshot; null fields were not given. */
    public record Version(String model, String version, boolean isDefault, String marName, Integer minWorkers,
                          Integer maxWorkers, Integer batchSize, Integer maxBatchDelay, Integer responseTimeout,
                          Integer startupTimeout, String runtimeType) {
    }

    private final String name;
    private final List<Version> versions;

    public ModelSnapshot(String name, List<Version> versions) {
        this.name = name;
        this.versions = Collections.unmodifiableList(new ArrayList<>(versions));
    }

    public String name() {
        return name;
    }

    /** Every version, grouped by model in the snapshot's order. */
    public List<Version> versions() {
        return versions;
    }

    /**
     * Parses and checks a snapshot; anything malformed throws a ConfigException naming the key
     * path (e.g. {@code model_snapshot: models.mnist.1.0.minWorkers}) and what was expected.
     */
    public static ModelSnapshot parse(String json) {
        JsonElement root;
        try {
            root = org.tserve.util.Json.parse(json);
        } catch (RuntimeException e) {
            throw new ConfigException("Configuration key '" + KEY + "' is not valid JSON: " + e.getMessage());
        }
        if (!root.isJsonObject()) {
            throw bad("", "must be a JSON object {\"name\", \"modelCount\", \"models\": {name: {version: {...}}}}");
        }
        JsonObject o = root.getAsJsonObject();
        String name = o.has("name") ? string(o.get("name"), "name") : "";
        if (o.has("modelCount")) {
            integer(o.get("modelCount"), "modelCount");
        }
        List<Version> out = new ArrayList<>();
        if (!o.has("models")) {
            return new ModelSnapshot(name, out);
        }
        JsonObject models = object(o.get("models"), "models");
        for (Map.Entry<String, JsonElement> m : models.entrySet()) {
            JsonObject vs = object(m.getValue(), "models." + m.getKey());
            if (vs.size() == 0) {
                throw bad("models." + m.getKey(), "has no versions");
            }
            int defaults = 0;
            for (Map.Entry<String, JsonElement> v : vs.entrySet()) {
                Version ver = version(m.getKey(), v.getKey(), object(v.getValue(), "models." + m.getKey() + "." + v.getKey()));
                defaults += ver.isDefault() ? 1 : 0;
                out.add(ver);
            }
            if (defaults > 1) {
                throw bad("models." + m.getKey(), "has " + defaults + " versions with \"defaultVersion\": true (at most one)");
            }
        }
        return new ModelSnapshot(name, out);
    }

    private static Version version(String model, String version, JsonObject o) {
        String path = "models." + model + "." + version;
        if (!o.has("marName")) {
            throw bad(path, "has no \"marName\" (the archive in the model store)");
        }
        String mar = string(o.get("marName"), path + ".marName");
        if (mar.isEmpty()) {
            throw bad(path + ".marName", "must not be empty");
        }
        Map<String, Integer> ints = new LinkedHashMap<>();
        for (String k : INT_KEYS) {
            if (o.has(k)) {
                int n = integer(o.get(k), path + "." + k);
                if (n < 0 || (n == 0 && k.equals("batchSize"))) {
                    throw bad(path + "." + k, (k.equals("batchSize") ? "must be at least 1" : "must not be negative")
                            + ", got " + n);
                }
                ints.put(k, n);
            }
        }
        Integer min = ints.get("minWorkers");
        Integer max = ints.get("maxWorkers");
        if (min != null && max != null && max < min) {
            throw bad(path + ".maxWorkers", "(" + max + ") cannot be less than minWorkers (" + min + ")");
        }
        boolean isDefault = o.has("defaultVersion") && bool(o.get("defaultVersion"), path + ".defaultVersion");
        String runtime = o.has("runtimeType") ? string(o.get("runtimeType"), path + ".runtimeType") : null;
        return new Version(model, version, isDefault, mar, min, max, ints.get("batchSize"), ints.get("maxBatchDelay"),
                ints.get("responseTimeout"), ints.get("startupTimeout"), runtime);
    }

    /** The snapshot as TorchServe writes it; {@code modelCount} counts model versions. */
    public JsonObject toJson(long createdMillis) {
        JsonObject o = new JsonObject();
        o.addProperty("name", name);
        o.addProperty("modelCount", versions.size());
        o.addProperty("created", createdMillis);
        JsonObject models = new JsonObject();
        for (Version v : versions) {
            JsonObject byVersion = models.has(v.model()) ? models.getAsJsonObject(v.model()) : new JsonObject();
            JsonObject e = new JsonObject();
            e.addProperty("defaultVersion", v.isDefault());
            e.addProperty("marName", v.marName());
            e.addProperty("minWorkers", v.minWorkers());
            e.addProperty("maxWorkers", v.maxWorkers());
            e.addProperty("batchSize", v.batchSize());
            e.addProperty("maxBatchDelay", v.maxBatchDelay());
            e.addProperty("responseTimeout", v.responseTimeout());
            e.addProperty("startupTimeout", v.startupTimeout());
            e.addProperty("runtimeType", v.runtimeType());
            byVersion.add(v.version(), e);
            models.add(v.model(), byVersion);
        }
        o.add("models", models);
        return o;
    }

    private static ConfigException bad(String path, String what) {
        return new ConfigException("Configuration key '" + KEY + "'" + (path.isEmpty() ? "" : ": " + path) + " " + what);
    }

    private static JsonObject object(JsonElement e, String path) {
        if (!e.isJsonObject()) {
            throw bad(path, "must be a JSON object, got " + e);
        }
        return e.getAsJsonObject();
    }

    private static String string(JsonElement e, String path) {
        if (!e.isJsonPrimitive() || !e.getAsJsonPrimitive().isString()) {
            throw bad(path, "must be a string, got " + e);
        }
        return e.getAsString();
    }

    private static boolean bool(JsonElement e, String path) {
        if (!e.isJsonPrimitive() || !e.getAsJsonPrimitive().isBoolean()) {
            throw bad(path, "must be true or false, got " + e);
        }
        return e.getAsBoolean();
    }

    private static int integer(JsonElement e, String path) {
        if (e.isJsonPrimitive() && e.getAsJsonPrimitive().isNumber()) {
            JsonPrimitive p = e.getAsJsonPrimitive();
            double d = p.getAsDouble();
            if (d == Math.rint(d) && Math.abs(d) <= Integer.MAX_VALUE) {
                return (int) d;
            }
        }
        throw bad(path, "must be an integer, got " + e);
    }
}

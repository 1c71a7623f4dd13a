package org.tserve.archive;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;

/** {@code MAR-INF/MANIFEST.json}: the fields the frontend reads. Missing fields are null. */
public final class Manifest {
    public String createdOn;
    public String runtime = "python";
    public String archiverVersion;
    public String modelName;
    public String modelVersion;
    public String handler;
    public String serializedFile;
    public String modelFile;
    public String requirementsFile;
    public String configFile;
    public String envelope;
    public String description;

    /** Parses the manifest text; invalid JSON throws ArchiveException(400). */
    public static Manifest parse(String json) throws ArchiveException {
        Manifest m = new Manifest();
        JsonObject root;
        try {
            JsonElement e = org.tserve.util.Json.parse(json);
            if (!e.isJsonObject()) {
                throw new ArchiveException(400, "MAR-INF/MANIFEST.json is not a JSON object");
            }
            root = e.getAsJsonObject();
        } catch (RuntimeException e) {
            throw new ArchiveException(400, "MAR-INF/MANIFEST.json is not valid JSON: " + e.getMessage());
        }
        m.createdOn = str(root, "createdOn");
        String rt = str(root, "runtime");
        if (rt != null) {
            m.runtime = rt;
        }
        m.archiverVersion = str(root, "archiverVersion");
        m.description = str(root, "description");
        if (root.has("model") && root.get("model").isJsonObject()) {
            JsonObject model = root.getAsJsonObject("model");
            m.modelName = str(model, "modelName");
            m.modelVersion = str(model, "modelVersion");
            if (m.modelVersion == null) {
                m.modelVersion = str(model, "version");
            }
            m.handler = str(model, "handler");
            m.serializedFile = str(model, "serializedFile");
            m.modelFile = str(model, "modelFile");
            m.requirementsFile = str(model, "requirementsFile");
            m.configFile = str(model, "configFile");
            m.envelope = str(model, "envelope");
        }
        return m;
    }

    private static String str(JsonObject o, String key) {
        JsonElement e = o.get(key);
        if (e == null || e.isJsonNull()) {
            return null;
        }
        String s = e.isJsonPrimitive() ? e.getAsString() : e.toString();
        return s.isEmpty() ? null : s;
    }
}

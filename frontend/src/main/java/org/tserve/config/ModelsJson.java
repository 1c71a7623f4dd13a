package org.tserve.config;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;
import java.util.LinkedHashMap;
import java.util.Map;

/** Parses config.properties' {@code models} JSON block: {@code {name: {version: {key: value}}}}. */
final class ModelsJson {
    private ModelsJson() {
    }

    static Map<String, Map<String, Map<String, Object>>> parse(String json) {
        JsonElement root;
        try {
            root = org.tserve.util.Json.parse(json);
        } catch (RuntimeException e) {
            throw new ConfigException("Configuration key 'models' is not valid JSON: " + e.getMessage());
        }
        if (!root.isJsonObject()) {
            throw new ConfigException("Configuration key 'models' must be a JSON object {name: {version: {...}}}");
        }
        Map<String, Map<String, Map<String, Object>>> out = new LinkedHashMap<>();
        for (Map.Entry<String, JsonElement> m : root.getAsJsonObject().entrySet()) {
            if (!m.getValue().isJsonObject()) {
                throw new ConfigException("Configuration key 'models': entry '" + m.getKey() + "' must be an object of versions");
            }
            Map<String, Map<String, Object>> versions = new LinkedHashMap<>();
            for (Map.Entry<String, JsonElement> v : m.getValue().getAsJsonObject().entrySet()) {
                if (!v.getValue().isJsonObject()) {
                    throw new ConfigException("Configuration key 'models': '" + m.getKey() + "/" + v.getKey() + "' must be an object");
                }
                Map<String, Object> settings = new LinkedHashMap<>();
                JsonObject o = v.getValue().getAsJsonObject();
                for (Map.Entry<String, JsonElement> s : o.entrySet()) {
                    settings.put(s.getKey(), toJava(s.getValue()));
                }
                versions.put(v.getKey(), settings);
            }
            out.put(m.getKey(), versions);
        }
        return out;
    }

    private static Object toJava(JsonElement e) {
        if (e.isJsonPrimitive()) {
            JsonPrimitive p = e.getAsJsonPrimitive();
            if (p.isBoolean()) {
                return p.getAsBoolean();
            }
            if (p.isNumber()) {
                double d = p.getAsDouble();
                return d == Math.rint(d) ? (Object) p.getAsLong() : (Object) d;
            }
            return p.getAsString();
        }
        return e.toString();
    }
}

package org.tserve.http;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.QueryStringDecoder;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.tserve.config.Compatibility;

/** Request parameters from the query string, or a JSON object body (management API). */
final class Params {
    private final Map<String, String> values = new HashMap<>();

    static Params of(FullHttpRequest req, QueryStringDecoder q) throws HttpError {
        Params p = new Params();
        for (Map.Entry<String, List<String>> e : q.parameters().entrySet()) {
            if (!e.getValue().isEmpty()) {
                p.values.put(e.getKey(), e.getValue().get(0));
            }
        }
        String ct = req.headers().get(HttpHeaderNames.CONTENT_TYPE);
        if (ct != null && ct.toLowerCase(java.util.Locale.ROOT).startsWith("application/json") && req.content().isReadable()) {
            JsonElement body;
            try {
                body = org.tserve.util.Json.parse(req.content().toString(StandardCharsets.UTF_8));
            } catch (RuntimeException e) {
                throw new HttpError(400, "Request body is not valid JSON: " + e.getMessage());
            }
            if (!body.isJsonObject()) {
                throw new HttpError(400, "Request body must be a JSON object of parameters");
            }
            for (Map.Entry<String, JsonElement> e : ((JsonObject) body).entrySet()) {
                JsonElement v = e.getValue();
                if (!v.isJsonNull()) {
                    p.values.put(e.getKey(), v.isJsonPrimitive() ? v.getAsString() : v.toString());
                }
            }
        }
        return p;
    }

    String str(String name) {
        String v = values.get(name);
        return v == null || v.isEmpty() ? null : v;
    }

    Integer integer(String name) throws HttpError {
        String v = str(name);
        if (v == null) {
            return null;
        }
        try {
            return Integer.parseInt(v.trim());
        } catch (NumberFormatException e) {
            throw new HttpError(400, "Parameter " + name + " must be an integer, got '" + v + "'");
        }
    }

    boolean bool(String name, boolean def) throws HttpError {
        String v = str(name);
        if (v == null) {
            return def;
        }
        if (v.equalsIgnoreCase("true")) {
            return true;
        }
        if (v.equalsIgnoreCase("false") || Compatibility.current().lenientBooleans()) {
            return false;   // TorchServe: anything but true is false
        }
        throw new HttpError(400, "Parameter " + name + " must be true or false, got '" + v + "'");
    }
}

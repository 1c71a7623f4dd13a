package org.tserve.http;

import com.google.gson.JsonObject;
import java.util.Map;

/**
 * OpenAPI 3 descriptions of each connector's API ({@code OPTIONS /}, {@code /api-description},
 * and the per-model {@code OPTIONS} routes): every route the connector serves, its parameters,
 * request bodies and the statuses it answers. The inference and management routes come from
 * {@link RouteTable}.
 *
 * @param tokenAuth token authorization is on: every operation needs {@code Authorization: Bearer <key>}
 * @param clusterMember the server is a cluster member: the management API has the /cluster routes
 */
record ApiDescription(boolean tokenAuth, boolean clusterMember) {
    /** Answers on every connector that no single route documents (they come before routing). */
    private static final String CONNECTION_ANSWERS = " Any request may also get 408 (request_read_timeout), 413 "
            + "(max_request_size, counted after decompressing a Content-Encoding: gzip or deflate body), 414 or 431 "
            + "(request line above 8192 bytes, headers above 65536), 415 (another Content-Encoding), 417 (an Expect "
            + "other than 100-continue) or 503 (max_connections), each with the JSON error body.";

    JsonObject inference() {
        OpenApiBuilder d = start("Inference API", "TorchServe-compatible inference API served by tserve.");
        RouteTable.document(d, Route.Api.INFERENCE, RouteTable.of(Route.Api.INFERENCE, clusterMember));
        return d.json();
    }

    JsonObject management() {
        OpenApiBuilder d = start("Management API", "TorchServe-compatible management API served by tserve.");
        RouteTable.document(d, Route.Api.MANAGEMENT, RouteTable.of(Route.Api.MANAGEMENT, clusterMember));
        return d.json();
    }

    JsonObject metrics() {
        OpenApiBuilder d = start("Metrics API", "TorchServe-compatible metrics API served by tserve (no token needed).");
        d.op("get", "/metrics", "metrics", "Prometheus metrics (text format 0.0.4), all or those named.")
                .querySchema("name[]", "{\"type\": \"array\", \"items\": {\"type\": \"string\"}}",
                        "Names of the metrics to return (default: all).")
                .text(200, "The metrics", "text/plain");
        return d.json();
    }

    /** The document of a connector; the shared inference+management connector has both APIs' paths. */
    JsonObject forConnector(ConnectorType t) {
        switch (t) {
            case INFERENCE: return inference();
            case MANAGEMENT: return management();
            case METRICS: return metrics();
            default:
                JsonObject d = inference();
                JsonObject paths = d.getAsJsonObject("paths");
                JsonObject mgmt = management();
                for (Map.Entry<String, com.google.gson.JsonElement> p : mgmt.getAsJsonObject("paths").entrySet()) {
                    JsonObject into = paths.has(p.getKey()) ? paths.getAsJsonObject(p.getKey()) : new JsonObject();
                    p.getValue().getAsJsonObject().entrySet().forEach(m -> into.add(m.getKey(), m.getValue()));
                    paths.add(p.getKey(), into);
                }
                JsonObject schemas = d.getAsJsonObject("components").getAsJsonObject("schemas");
                mgmt.getAsJsonObject("components").getAsJsonObject("schemas").entrySet()
                        .forEach(s -> schemas.add(s.getKey(), s.getValue()));
                d.getAsJsonObject("info").addProperty("title", "Inference and Management API");
                return d;
        }
    }

    /** A document with its own description operations ({@code OPTIONS /}, {@code GET /api-description}). */
    private OpenApiBuilder start(String title, String description) {
        OpenApiBuilder d = new OpenApiBuilder(title, description + CONNECTION_ANSWERS);
        if (tokenAuth && !title.startsWith("Metrics")) {
            d.bearerAuth("The key of this API from key_file.json (the descriptions themselves need none).");
        }
        d.op("options", "/", "apiDescription", "This API's OpenAPI description.")
                .noAuth().jsonInline(200, "The OpenAPI description", "{\"type\": \"object\"}");
        d.op("get", "/api-description", "getApiDescription", "This API's OpenAPI description (any method).")
                .noAuth().jsonInline(200, "The OpenAPI description", "{\"type\": \"object\"}");
        return d;
    }
}

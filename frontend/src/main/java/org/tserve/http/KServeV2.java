package org.tserve.http;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import java.util.List;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.api.ModelDescription;
import org.tserve.wlm.api.WlmException;

/**
 * The Open Inference Protocol (KServe v2) routes besides infer/explain: server metadata
 * ({@code GET /v2}), liveness and readiness ({@code /v2/health/live|ready}), model metadata and
 * readiness ({@code GET /v2/models/{m}[/versions/{v}][/ready]}). Owned by java-grpc-metrics.
 */
final class KServeV2 {
    private KServeV2() {
    }

    /** {@code GET /v2}. */
    static void serverMetadata(RouteCall c) {
        JsonObject o = new JsonObject();
        o.addProperty("name", "tserve");
        o.addProperty("version", org.tserve.server.ServerVersion.get());
        JsonArray ext = new JsonArray();
        ext.add("kserve");
        ext.add("kubeflow");
        ext.add("binary_tensor_data");   // the kservev2 envelope reads and writes it (tritonclient's default)
        o.add("extensions", ext);
        c.ex.sendJson(200, o);
    }

    /** {@code GET /v2/health/live}. */
    static void live(RouteCall c) {
        JsonObject o = new JsonObject();
        o.addProperty("live", true);
        c.ex.sendJson(200, o);
    }

    /** {@code GET /v2/health/ready}: 503 while the server is not ready. */
    static void ready(RouteCall c) {
        JsonObject o = new JsonObject();
        boolean ready = c.apis.inference().models().health().ready();
        o.addProperty("ready", ready);
        c.ex.sendJson(ready ? 200 : 503, o);
    }

    /** {@code GET /v2/models/{m}[/versions/{v}]}. */
    static void modelMetadata(RouteCall c) throws HttpError {
        c.ex.sendJson(200, metadata(c.apis.inference().models(), c.path(Route.MODEL), c.path(Route.VERSION)));
    }

    /** {@code GET /v2/models/{m}[/versions/{v}]/ready}. */
    static void modelReady(RouteCall c) throws HttpError {
        ModelReadiness.answer(c.ex, c.apis.inference().models(), c.path(Route.MODEL), c.path(Route.VERSION));
    }

    private static List<ModelDescription> describe(ModelManager models, String model, String version) throws HttpError {
        try {
            return models.describe(model, version);
        } catch (WlmException e) {
            throw new HttpError(e.getStatus(), e.getMessage());
        }
    }

    private static JsonObject metadata(ModelManager models, String model, String version) throws HttpError {
        List<ModelDescription> ds = describe(models, model, version);
        JsonArray versions = new JsonArray();
        for (ModelDescription d : describe(models, model, "all")) {
            versions.add(d.modelVersion());
        }
        JsonObject o = new JsonObject();
        o.addProperty("name", model);
        o.add("versions", versions);
        o.addProperty("platform", "pytorch");
        o.add("inputs", new JsonArray());
        o.add("outputs", new JsonArray());
        o.addProperty("version", ds.get(0).modelVersion());
        return o;
    }

}

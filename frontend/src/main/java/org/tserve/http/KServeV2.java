package org.tserve.http;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpMethod;
import java.util.List;
import org.tserve.wlm.ModelDescription;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.WlmException;

/**
 * The Open Inference Protocol (KServe v2) routes besides infer/explain: server metadata
 * ({@code GET /v2}), liveness and readiness ({@code /v2/health/live|ready}), model metadata and
 * readiness ({@code GET /v2/models/{m}[/versions/{v}][/ready]}). Owned by java-grpc-metrics.
 */
final class KServeV2 {
    private KServeV2() {
    }

    /** Handles {@code seg} (starting with "v2") if it is one of these GET routes; false otherwise. */
    static boolean handle(Exchange ex, FullHttpRequest req, String[] seg, ModelManager models) throws HttpError {
        boolean get = req.method().equals(HttpMethod.GET);
        if (seg.length == 1 && get) {
            JsonObject o = new JsonObject();
            o.addProperty("name", "tserve");
            o.addProperty("version", org.tserve.ModelServer.version());
            JsonArray ext = new JsonArray();
            ext.add("kserve");
            ext.add("kubeflow");
            o.add("extensions", ext);
            ex.sendJson(200, o);
            return true;
        }
        if (seg.length == 3 && seg[1].equals("health") && get) {
            JsonObject o = new JsonObject();
            if (seg[2].equals("live")) {
                o.addProperty("live", true);
                ex.sendJson(200, o);
                return true;
            }
            if (seg[2].equals("ready")) {
                boolean ready = models.health().ready();
                o.addProperty("ready", ready);
                ex.sendJson(ready ? 200 : 503, o);
                return true;
            }
            return false;
        }
        if (seg.length < 3 || !seg[1].equals("models") || !get) {
            return false;
        }
        String model = seg[2];
        int i = 3;
        String version = null;
        if (seg.length >= 5 && seg[3].equals("versions")) {
            version = seg[4];
            i = 5;
        }
        if (seg.length == i) {
            ex.sendJson(200, metadata(models, model, version));
            return true;
        }
        if (seg.length == i + 1 && seg[i].equals("ready")) {
            ModelReadiness.answer(ex, models, model, version);
            return true;
        }
        return false;
    }

    /** The model version named by a {@code /v2/models/{m}/versions/{v}/infer|explain} path, else null. */
    static String inferVersion(String[] seg) {
        return seg.length == 6 && seg[1].equals("models") && seg[3].equals("versions") ? seg[4] : null;
    }

    /** True for {@code /v2/models/{m}[/versions/{v}]/infer|explain}. */
    static boolean isInfer(String[] seg) {
        if (seg.length < 4 || !seg[1].equals("models")) {
            return false;
        }
        String last = seg[seg.length - 1];
        boolean op = last.equals("infer") || last.equals("explain");
        return op && (seg.length == 4 || (seg.length == 6 && seg[3].equals("versions")));
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

package org.tserve.http;

import com.google.gson.JsonObject;
import io.netty.handler.codec.http.HttpMethod;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.WlmException;

/**
 * Per-model readiness for KServe's probes ({@code GET /v1/models/{m}}, {@code GET
 * /v2/models/{m}[/versions/{v}]/ready}), and which routes are probes: with
 * {@code health_check_no_auth=true} those answer without a token.
 */
final class ModelReadiness {
    private ModelReadiness() {
    }

    /** A version of the model (null = its default version) has a READY worker; 404 when unknown. */
    static boolean ready(ModelManager models, String model, String version) throws HttpError {
        try {
            return models.hasReadyWorker(model, version);
        } catch (WlmException e) {
            throw new HttpError(e.getStatus(), e.getMessage());
        }
    }

    /** Answers {@code {"name", "ready"}}: 200 when ready, 503 when not (KServe's ModelNotReady). */
    static void answer(Exchange ex, ModelManager models, String model, String version) throws HttpError {
        boolean ready = ready(models, model, version);
        JsonObject o = new JsonObject();
        o.addProperty("name", model);
        o.addProperty("ready", ready);
        ex.sendJson(ready ? 200 : 503, o);
    }

    /** KServe v1's model ready: {@code GET /v1/models/{m}} (TorchServe also takes {@code /v1/models/{m}:anything}). */
    static boolean isV1Ready(String[] seg, HttpMethod method) {
        return seg.length == 3 && seg[0].equals("v1") && seg[1].equals("models") && method.equals(HttpMethod.GET);
    }

    /** The model name of a {@code /v1/models/{m}[:verb]} path's last segment. */
    static String v1Model(String segment) {
        int colon = segment.indexOf(':');
        return colon < 0 ? segment : segment.substring(0, colon);
    }

    /**
     * Liveness and readiness probes: {@code /ping}, {@code /v2/health/live|ready},
     * {@code /v2/models/{m}[/versions/{v}]/ready} and KServe v1's model ready.
     */
    static boolean isProbe(String[] seg, HttpMethod method) {
        if (!method.equals(HttpMethod.GET) && !(seg.length == 1 && seg[0].equals("ping"))) {
            return false;   // TorchServe's /ping answers any method
        }
        if (seg.length == 1) {
            return seg[0].equals("ping");
        }
        if (!seg[0].equals("v2")) {
            return isV1Ready(seg, method);
        }
        if (seg.length == 3 && seg[1].equals("health")) {
            return seg[2].equals("live") || seg[2].equals("ready");
        }
        boolean modelReady = seg.length == 4 || (seg.length == 6 && seg[3].equals("versions"));
        return modelReady && seg[1].equals("models") && seg[seg.length - 1].equals("ready");
    }
}

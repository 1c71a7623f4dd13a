package org.tserve.http;

import com.google.gson.JsonObject;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.api.WlmException;

/**
 * Per-model readiness for KServe's probes ({@code GET /v1/models/{m}}, {@code GET
 * /v2/models/{m}[/versions/{v}]/ready}); with {@code health_check_no_auth=true} those answer
 * without a token ({@link Route.Auth#INFERENCE_PROBE}).
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

    /** The model name of a {@code /v1/models/{m}[:verb]} path's last segment. */
    static String v1Model(String segment) {
        int colon = segment.indexOf(':');
        return colon < 0 ? segment : segment.substring(0, colon);
    }
}

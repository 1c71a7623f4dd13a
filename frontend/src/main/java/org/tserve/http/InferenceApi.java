package org.tserve.http;

import com.google.gson.JsonObject;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpMethod;
import java.util.List;
import org.tserve.wlm.Job;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.WlmException;
import org.tserve.wlm.protocol.Header;
import org.tserve.wlm.protocol.Part;

/** The inference API: /ping, /predictions, /explanations, the KServe-style and the OpenAI-compatible routes. */
final class InferenceApi {
    private final ModelManager models;
    private final OpenAiApi openAi;

    InferenceApi(ModelManager models) {
        this.models = models;
        this.openAi = new OpenAiApi(models);
    }

    /** Handles the request if it is an inference route; returns false otherwise. */
    boolean handle(Exchange ex, FullHttpRequest req, String[] seg) throws HttpError {
        if (seg.length == 0) {
            return false;
        }
        OpenAiApi.Route openAiRoute = OpenAiApi.route(seg);   // /v1/completions, /predictions/{m}/v1/..., ...
        if (openAiRoute != null) {
            openAi.handle(ex, req, openAiRoute);
            return true;
        }
        switch (seg[0]) {
            case "ping":
                if (seg.length != 1) {
                    return false;
                }
                boolean healthy = models.isHealthy();
                JsonObject o = new JsonObject();
                o.addProperty("status", healthy ? "Healthy" : "Unhealthy");
                ex.sendJson(healthy ? 200 : 500, o);
                return true;
            case "predictions":
            case "explanations":
                if (seg.length < 2) {
                    return false;
                }
                if (req.method().equals(HttpMethod.OPTIONS)) {
                    ex.sendJson(200, ApiDescription.inference());
                    return true;
                }
                String version = seg.length > 2 ? seg[2] : null;
                StringBuilder extra = new StringBuilder();
                for (int i = 3; i < seg.length; i++) {
                    extra.append(i > 3 ? "/" : "").append(seg[i]);
                }
                predict(ex, req, seg[1], version, extra.toString(), seg[0].equals("explanations"));
                return true;
            case "v1":
                // KServe v1: /v1/models/{model}:predict | :explain
                if (seg.length == 3 && seg[1].equals("models") && req.method().equals(HttpMethod.POST)) {
                    String s = seg[2];
                    if (s.endsWith(":predict") || s.endsWith(":explain")) {
                        String model = s.substring(0, s.lastIndexOf(':'));
                        predict(ex, req, model, null, "", s.endsWith(":explain"));
                        return true;
                    }
                }
                return false;
            case "v2":
                // KServe v2: /v2/models/{model}[/versions/{v}]/infer | /explain; metadata, health (KServeV2)
                if (KServeV2.isInfer(seg) && req.method().equals(HttpMethod.POST)) {
                    predict(ex, req, seg[2], KServeV2.inferVersion(seg), "", seg[seg.length - 1].equals("explain"));
                    return true;
                }
                return KServeV2.handle(ex, req, seg, models);
            default:
                return false;
        }
    }

    private void predict(Exchange ex, FullHttpRequest req, String model, String version, String urlPath, boolean explain)
            throws HttpError {
        List<Header> headers = InputParser.headers(req, 2);
        headers.add(new Header("url_path", urlPath));
        headers.add(new Header("explain", explain ? "True" : "False"));
        List<Part> parts = InputParser.parts(req);
        HttpJobResponder responder = new HttpJobResponder(ex);
        Job job = new Job(ex.requestId, model, version, headers, parts, responder);
        try {
            org.tserve.metrics.InferenceRequests.submit(models, job);   // counted once the model is found
        } catch (WlmException e) {
            throw new HttpError(e.getStatus(), e.getMessage());
        }
        responder.cancelOnClose(job);
    }
}

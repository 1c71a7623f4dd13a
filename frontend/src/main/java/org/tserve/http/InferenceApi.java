package org.tserve.http;

import com.google.gson.JsonObject;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.QueryStringDecoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.tserve.wlm.Health;
import org.tserve.wlm.Job;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.WlmException;
import org.tserve.wlm.protocol.Header;
import org.tserve.wlm.protocol.Part;

/**
 * The inference API: /ping, /predictions, /explanations, the KServe-style and OpenAI-compatible
 * routes, SageMaker's /invocations and /models/{m}/invoke, and the legacy /{m}[/{v}]/predict.
 */
final class InferenceApi {
    /** First path segments that are never a model name of the legacy /{m}/predict route. */
    private static final Set<String> RESERVED = Set.of("ping", "predictions", "explanations", "v1", "v2", "models",
        "invocations", "api-description", "metrics", "token", "workflows", "wfpredict");
    private final ModelManager models;
    private final OpenAiApi openAi;
    private final ApiDescription description;

    InferenceApi(ModelManager models, ApiDescription description) {
        this.models = models;
        this.description = description;
        this.openAi = new OpenAiApi(models, description);
    }

    /** Handles the request if it is an inference route; returns false otherwise. */
    boolean handle(Exchange ex, FullHttpRequest req, String[] seg, QueryStringDecoder q) throws HttpError {
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
                Health health = models.health();
                JsonObject o = new JsonObject();
                o.addProperty("status", health.text);
                ex.sendJson(health.ready() ? 200 : 500, o);
                return true;
            case "predictions":
            case "explanations":
                if (seg.length < 2) {
                    return false;
                }
                if (req.method().equals(HttpMethod.OPTIONS)) {
                    ex.sendJson(200, description.inference());
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
                if (ModelReadiness.isV1Ready(seg, req.method())) {
                    ModelReadiness.answer(ex, models, ModelReadiness.v1Model(seg[2]), null);
                    return true;
                }
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
                if (KServeGenerate.isGenerate(seg)) {
                    KServeGenerate.handle(models, ex, req, seg);
                    return true;
                }
                if (KServeV2.isInfer(seg) && req.method().equals(HttpMethod.POST)) {
                    predict(ex, req, seg[2], KServeV2.inferVersion(seg), "", seg[seg.length - 1].equals("explain"));
                    return true;
                }
                return KServeV2.handle(ex, req, seg, models);
            case "invocations":
                // SageMaker: /invocations?model_name=M
                if (seg.length != 1) {
                    return false;
                }
                queryRoute(ex, req, q, null, null);
                return true;
            case "models":
                // SageMaker multi-model endpoint: /models/{model}/invoke
                if (seg.length == 3 && seg[2].equals("invoke")) {
                    queryRoute(ex, req, q, seg[1], null);
                    return true;
                }
                return false;
            default:
                // MMS's legacy /{model}/predict and /{model}/{version}/predict
                if (isLegacyPredict(seg)) {
                    queryRoute(ex, req, q, seg[0], seg.length == 3 ? seg[1] : null);
                    return true;
                }
                return false;
        }
    }

    /** {@code /{model}/predict} or {@code /{model}/{version}/predict}, the model not one of the API's own names. */
    static boolean isLegacyPredict(String[] seg) {
        return (seg.length == 2 || seg.length == 3) && seg[seg.length - 1].equals("predict") && !RESERVED.contains(seg[0]);
    }

    /**
     * The SageMaker and legacy routes: as TorchServe, each query parameter becomes a handler input
     * (before the body's), and /invocations takes its model from the {@code model_name} query
     * parameter, else a {@code model_name} form field, else the only registered model.
     */
    private void queryRoute(Exchange ex, FullHttpRequest req, QueryStringDecoder q, String model, String version)
            throws HttpError {
        List<Part> parts = new ArrayList<>();
        for (Map.Entry<String, List<String>> e : q.parameters().entrySet()) {
            for (String v : e.getValue()) {
                parts.add(new Part(e.getKey(), "", v.getBytes(StandardCharsets.UTF_8)));
            }
        }
        parts.addAll(InputParser.parts(req));
        if (model == null) {
            for (Part p : parts) {
                if (p.name().equals("model_name") && p.value().length > 0) {
                    model = new String(p.value(), StandardCharsets.UTF_8);
                    break;
                }
            }
        }
        if (model == null) {
            List<String> names = models.modelNames();
            if (names.size() != 1) {
                throw new HttpError(400, "BadRequestException", "Parameter model_name is required.");
            }
            model = names.get(0);
        }
        submit(ex, req, model, version, "", false, parts);
    }

    private void predict(Exchange ex, FullHttpRequest req, String model, String version, String urlPath, boolean explain)
            throws HttpError {
        submit(ex, req, model, version, urlPath, explain, InputParser.parts(req));
    }

    private void submit(Exchange ex, FullHttpRequest req, String model, String version, String urlPath, boolean explain,
                        List<Part> parts) throws HttpError {
        List<Header> headers = InputParser.headers(req, 2);
        headers.add(new Header("url_path", urlPath));
        headers.add(new Header("explain", explain ? "True" : "False"));
        HttpJobResponder responder = new HttpJobResponder(ex);
        ex.model = model;   // for the access log
        Job job = new Job(ex.requestId, model, version, headers, parts, responder);
        try {
            org.tserve.metrics.InferenceRequests.submit(models, job);   // counted once the model is found
        } catch (WlmException e) {
            throw new HttpError(e.getStatus(), e.getMessage());
        }
        responder.cancelOnClose(job);
    }
}

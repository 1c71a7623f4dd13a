package org.tserve.http;

import com.google.gson.JsonObject;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.QueryStringDecoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.api.Header;
import org.tserve.wlm.api.Health;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.Part;
import org.tserve.wlm.api.WlmException;

/**
 * The inference API's handlers ({@link InferenceRoutes} routes to them): /ping, /predictions, /explanations, the KServe-style and OpenAI-compatible
 * routes, SageMaker's /invocations and /models/{m}/invoke, and the legacy /{m}[/{v}]/predict.
 */
final class InferenceApi {
    private final ModelManager models;
    private final OpenAiApi openAi;
    private final ApiDescription description;

    InferenceApi(ModelManager models, ApiDescription description) {
        this.models = models;
        this.description = description;
        this.openAi = new OpenAiApi(models, description);
    }

    ModelManager models() {
        return models;
    }

    /** {@code /ping} (any method): the server's health. */
    void ping(RouteCall c) {
        Health health = models.health();
        JsonObject o = new JsonObject();
        o.addProperty("status", health.text);
        c.ex.sendJson(health.ready() ? 200 : 500, o);
    }

    /**
     * {@code /predictions|explanations/{m}[/{v}[/...]]} (any method): OPTIONS answers the API's
     * description; segments after the version reach the handler as its url_path header.
     */
    void predictions(RouteCall c, boolean explain) throws HttpError {
        if (c.req.method().equals(HttpMethod.OPTIONS)) {
            c.ex.sendJson(200, description.inference());
            return;
        }
        predict(c.ex, c.req, c.path(Route.MODEL), c.path(Route.VERSION), c.tail, explain);
    }

    /** KServe v1: {@code POST /v1/models/{m}:predict|:explain}. */
    void kserveV1(RouteCall c, boolean explain) throws HttpError {
        predict(c.ex, c.req, c.path(Route.MODEL), null, "", explain);
    }

    /**
     * {@code GET /v1/models/{m}} ({@code /v1/models/{m}:anything} too): OpenAI's model object and
     * KServe v1's readiness in one answer ({@link OpenAiApi#modelObject}).
     */
    void v1Model(RouteCall c) throws HttpError {
        openAi.modelObject(c.ex, ModelReadiness.v1Model(c.path(Route.MODEL)));
    }

    /** The Open Inference Protocol's {@code POST /v2/models/{m}[/versions/{v}]/infer|explain}. */
    void kserveV2(RouteCall c, boolean explain) throws HttpError {
        predict(c.ex, c.req, c.path(Route.MODEL), c.path(Route.VERSION), "", explain);
    }

    /** The OIP generate extension ({@link KServeGenerate}). */
    void generate(RouteCall c, boolean stream) throws HttpError {
        KServeGenerate.handle(models, c.ex, c.req, c.path(Route.MODEL), c.path(Route.VERSION), stream);
    }

    /** An OpenAI-compatible route ({@link OpenAiApi}): {@code endpoint} is completions, chat/completions or models. */
    void openAi(RouteCall c, String endpoint) throws HttpError {
        openAi.handle(c.ex, c.req, new OpenAiApi.Route(endpoint, c.path(Route.MODEL), c.path(Route.VERSION)));
    }

    /** SageMaker's {@code /invocations?model_name=M}. */
    void invocations(RouteCall c) throws HttpError {
        queryRoute(c.ex, c.req, c.q, null, null);
    }

    /** SageMaker's {@code /models/{m}/invoke} and MMS' legacy {@code /{m}[/{v}]/predict}. */
    void legacy(RouteCall c) throws HttpError {
        queryRoute(c.ex, c.req, c.q, c.path(Route.MODEL), c.path(Route.VERSION));
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
        parts.addAll(ex.parts(req));
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
        submit(ex, req, model, version, urlPath, explain, ex.parts(req));
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
            models.submit(job);
        } catch (WlmException e) {
            throw new HttpError(e.getStatus(), e.getMessage());
        }
        responder.cancelOnClose(job);
    }
}

package org.tserve.http;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;

/** OpenAPI 3 descriptions of each connector's API ({@code OPTIONS /} and {@code /api-description}). */
final class ApiDescription {
    private ApiDescription() {
    }

    private static JsonObject doc(String title) {
        JsonObject o = new JsonObject();
        o.addProperty("openapi", "3.0.1");
        JsonObject info = new JsonObject();
        info.addProperty("title", title);
        info.addProperty("description", "TorchServe-compatible " + title + " served by tserve");
        info.addProperty("version", org.tserve.ModelServer.version());
        o.add("info", info);
        o.add("paths", new JsonObject());
        return o;
    }

    private static void op(JsonObject doc, String path, String method, String operationId, String summary,
                           String[][] params, String... responses) {
        JsonObject paths = doc.getAsJsonObject("paths");
        JsonObject p = paths.has(path) ? paths.getAsJsonObject(path) : new JsonObject();
        JsonObject o = new JsonObject();
        o.addProperty("operationId", operationId);
        o.addProperty("description", summary);
        JsonArray ps = new JsonArray();
        for (String[] par : params) {
            JsonObject x = new JsonObject();
            x.addProperty("in", par[0]);
            x.addProperty("name", par[1]);
            x.addProperty("description", par[2]);
            x.addProperty("required", par[0].equals("path") || (par.length > 3 && par[3].equals("required")));
            JsonObject schema = new JsonObject();
            schema.addProperty("type", par.length > 4 ? par[4] : "string");
            x.add("schema", schema);
            ps.add(x);
        }
        o.add("parameters", ps);
        JsonObject rs = new JsonObject();
        for (String r : responses) {
            JsonObject d = new JsonObject();
            d.addProperty("description", describe(r));
            JsonObject content = new JsonObject();
            JsonObject json = new JsonObject();
            JsonObject schema = new JsonObject();
            schema.addProperty("type", "object");
            json.add("schema", schema);
            content.add("application/json", json);
            d.add("content", content);
            rs.add(r, d);
        }
        o.add("responses", rs);
        p.add(method, o);
        paths.add(path, p);
    }

    private static String describe(String code) {
        switch (code) {
            case "200": return "OK";
            case "202": return "Accepted: worker updates in progress";
            case "400": return "Bad request (the message names the parameter)";
            case "401": return "Missing or wrong token (the message names the key)";
            case "403": return "Forbidden";
            case "404": return "Model, version or resource not found";
            case "405": return "Method not allowed (or model API disabled)";
            case "409": return "Model version already registered";
            case "413": return "Request larger than max_request_size";
            case "429": return "Too many requests: retry after the Retry-After header's seconds";
            case "500": return "Internal error or handler error";
            case "503": return "No worker, or job queue full";
            case "504": return "Handler did not answer within responseTimeout";
            default: return "Error";
        }
    }

    private static final String[] MODEL = {"path", "model_name", "Name of the model."};
    private static final String[] VERSION = {"path", "model_version", "Version of the model."};

    static JsonObject inference() {
        JsonObject d = doc("Inference API");
        op(d, "/", "options", "apiDescription", "Get openapi description.", new String[0][], "200");
        op(d, "/ping", "get", "ping", "Get TorchServe status.", new String[0][], "200", "500");
        for (String kind : new String[] {"predictions", "explanations"}) {
            String verb = kind.equals("predictions") ? "predictions" : "explanations";
            op(d, "/" + kind + "/{model_name}", "post", verb, "Run " + verb + " on the default version of a model.",
                    new String[][] {MODEL}, "200", "401", "404", "413", "500", "503", "504");
            op(d, "/" + kind + "/{model_name}/{model_version}", "post", "version" + verb,
                    "Run " + verb + " on a version of a model.", new String[][] {MODEL, VERSION},
                    "200", "401", "404", "413", "500", "503", "504");
        }
        op(d, "/v1/models/{model_name}:predict", "post", "kservePredict", "KServe v1 predict.", new String[][] {MODEL},
                "200", "404", "500", "503");
        op(d, "/v2/models/{model_name}/infer", "post", "kservev2Infer", "KServe v2 infer.", new String[][] {MODEL},
                "200", "404", "500", "503");
        openAi(d);
        return d;
    }

    /** The OpenAI-compatible routes ({@link OpenAiApi}): /v1/... and TorchServe's /predictions/{m}[/{v}]/v1/... forms. */
    private static void openAi(JsonObject d) {
        String[][][] forms = {{}, {MODEL}, {MODEL, VERSION}};
        String[] prefixes = {"", "/predictions/{model_name}", "/predictions/{model_name}/{model_version}"};
        String[] ids = {"openai", "openaiModel", "openaiModelVersion"};
        String[] which = {"", " (the path names the model; the body's model is ignored)",
            " (the path names the model and version; the body's model is ignored)"};
        for (int i = 0; i < forms.length; i++) {
            op(d, prefixes[i] + "/v1/completions", "post", ids[i] + "Completions",
                    "OpenAI-compatible text completion; \"stream\": true answers Server-Sent Events" + which[i] + ".",
                    forms[i], "200", "400", "401", "404", "429", "500", "503");
            op(d, prefixes[i] + "/v1/chat/completions", "post", ids[i] + "ChatCompletions",
                    "OpenAI-compatible chat completion; \"stream\": true answers Server-Sent Events" + which[i] + ".",
                    forms[i], "200", "400", "401", "404", "429", "500", "503");
            op(d, prefixes[i] + "/v1/models", "get", ids[i] + "Models",
                    i == 0 ? "OpenAI-compatible list of the registered models (default versions)."
                            : "OpenAI-compatible list holding the model the path names.",
                    forms[i], "200", "401", "404");
        }
    }

    static JsonObject management() {
        JsonObject d = doc("Management API");
        op(d, "/", "options", "apiDescription", "Get openapi description.", new String[0][], "200");
        op(d, "/models", "get", "listModels", "List registered models.", new String[][] {
            {"query", "limit", "Page size (default 100).", "", "integer"},
            {"query", "next_page_token", "Token of the next page.", "", "string"}}, "200");
        op(d, "/models", "post", "registerModel", "Register a new model (needs enable_model_api=true).", new String[][] {
            {"query", "url", "Archive name in the model store, local path or allowed URL.", "required"},
            {"query", "model_name", "Name of the model (default: from the manifest)."},
            {"query", "handler", "Handler (default: from the manifest)."},
            {"query", "runtime", "python or python3."},
            {"query", "batch_size", "Inference batch size.", "", "integer"},
            {"query", "max_batch_delay", "Maximum batching delay in ms.", "", "integer"},
            {"query", "initial_workers", "Number of initial workers.", "", "integer"},
            {"query", "synchronous", "Wait for the workers (default true).", "", "boolean"},
            {"query", "response_timeout", "Seconds a worker may take per batch.", "", "integer"},
            {"query", "startup_timeout", "Seconds a worker may take to load.", "", "integer"},
            {"query", "preprocess_workers", "CPU preprocess workers per worker (tserve).", "", "integer"},
            {"query", "postprocess_in_pool", "Run postprocess in the preprocess pool too (tserve).", "", "boolean"}},
                "200", "202", "400", "401", "404", "405", "409", "500");
        String[][] scale = {MODEL, {"query", "min_worker", "Minimum workers (default 1).", "", "integer"},
            {"query", "max_worker", "Maximum workers (default min_worker).", "", "integer"},
            {"query", "synchronous", "Wait for the workers (default false).", "", "boolean"},
            {"query", "timeout", "Accepted for compatibility.", "", "integer"}};
        String[][] scaleV = {MODEL, VERSION, scale[1], scale[2], scale[3], scale[4]};
        op(d, "/models/{model_name}", "get", "describeModel", "Describe the default version ('customized=true' asks the handler).",
                new String[][] {MODEL, {"query", "customized", "Include the handler's metadata.", "", "boolean"}},
                "200", "404", "503");
        op(d, "/models/{model_name}", "put", "setAutoScale", "Scale the workers of the default version.", scale,
                "200", "202", "400", "404", "500");
        op(d, "/models/{model_name}", "delete", "unregisterModel", "Unregister the default version.", new String[][] {MODEL},
                "200", "403", "404", "405");
        op(d, "/models/{model_name}/{model_version}", "get", "describeModelVersion", "Describe a version ('all' for every version).",
                new String[][] {MODEL, VERSION}, "200", "404");
        op(d, "/models/{model_name}/{model_version}", "put", "setAutoScaleVersion", "Scale the workers of a version.", scaleV,
                "200", "202", "400", "404", "500");
        op(d, "/models/{model_name}/{model_version}", "delete", "unregisterModelVersion", "Unregister a version.",
                new String[][] {MODEL, VERSION}, "200", "403", "404", "405");
        op(d, "/models/{model_name}/{model_version}/set-default", "put", "setDefault", "Make a version the default.",
                new String[][] {MODEL, VERSION}, "200", "404");
        op(d, "/token", "post", "rotateToken", "Regenerate the management or inference key (needs the API key).",
                new String[][] {{"query", "type", "management or inference", "required"}}, "200", "400", "401");
        return d;
    }

    static JsonObject metrics() {
        JsonObject d = doc("Metrics API");
        op(d, "/", "options", "apiDescription", "Get openapi description.", new String[0][], "200");
        op(d, "/metrics", "get", "metrics", "Prometheus metrics (text format 0.0.4).",
                new String[][] {{"query", "name[]", "Names of metrics to return."}}, "200");
        return d;
    }

    static JsonObject forConnector(ConnectorType t) {
        switch (t) {
            case INFERENCE: return inference();
            case MANAGEMENT: return management();
            case METRICS: return metrics();
            default:
                JsonObject d = inference();
                JsonObject paths = d.getAsJsonObject("paths");
                management().getAsJsonObject("paths").entrySet().forEach(e -> paths.add(e.getKey(), e.getValue()));
                d.getAsJsonObject("info").addProperty("title", "Inference and Management API");
                return d;
        }
    }
}

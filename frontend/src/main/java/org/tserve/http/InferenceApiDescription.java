package org.tserve.http;

import static org.tserve.http.OpenApiBuilder.ERROR;
import static org.tserve.http.OpenApiBuilder.STATUS;

/**
 * The inference connector's routes in the OpenAPI description ({@link InferenceApi},
 * {@link KServeV2}, {@link OpenAiApi}): each with its parameters, body and every status it answers.
 */
final class InferenceApiDescription {
    private InferenceApiDescription() {
    }

    static final String MODEL = "model_name";
    static final String VERSION = "model_version";
    private static final String MODEL_DOC = "Name of the model.";
    private static final String VERSION_DOC = "Version of the model.";
    /** What a handler route answers besides the handler's own 200: the frontend's errors, then the handler's. */
    private static final int[] HANDLER_ERRORS = {400, 401, 404, 413, 429, 500, 503, 504, 507};
    private static final String ANY_JSON = "{}";
    private static final String BINARY = "{\"type\": \"string\", \"format\": \"binary\"}";

    /** The paths of the inference connector. */
    static void add(OpenApiBuilder d) {
        d.schema("OpenAiModelList", "{\"type\": \"object\", \"required\": [\"object\", \"data\"], \"properties\": {"
                + "\"object\": {\"type\": \"string\", \"enum\": [\"list\"]}, \"data\": {\"type\": \"array\", \"items\": {"
                + "\"type\": \"object\", \"required\": [\"id\", \"object\", \"created\", \"owned_by\"], \"properties\": {"
                + "\"id\": {\"type\": \"string\"}, \"object\": {\"type\": \"string\"}, \"created\": {\"type\": \"integer\"},"
                + " \"owned_by\": {\"type\": \"string\"}}}}}}");
        d.schema(OpenApiBuilder.OPENAI_ERROR, "{\"type\": \"object\", \"required\": [\"error\"], \"properties\": {\"error\": {"
                + "\"type\": \"object\", \"required\": [\"message\", \"type\"], \"properties\": {\"message\": {\"type\": \"string\"},"
                + " \"type\": {\"type\": \"string\"}, \"param\": {\"type\": \"string\", \"nullable\": true},"
                + " \"code\": {\"type\": \"string\", \"nullable\": true}}}}}");
        for (String method : new String[] {"get", "post"}) {
            d.op(method, "/ping", method + "Ping", "Server health (any method): Healthy or Partial Healthy (200), "
                    + "Unhealthy (500) while a model has no running worker or startup models still load.")
                    .json(200, "Healthy or Partial Healthy", STATUS).json(500, "Unhealthy", STATUS).errors(401, 429);
        }
        for (String kind : new String[] {"predictions", "explanations"}) {
            String verb = kind.equals("predictions") ? "Predictions" : "Explanations";
            handlerRoute(d.op("post", "/" + kind + "/{model_name}", kind, "Run " + kind + " on the default version of a "
                    + "model (any method but OPTIONS works; further path segments after the version reach the "
                    + "handler as the url_path header).").path(MODEL, MODEL_DOC));
            handlerRoute(d.op("post", "/" + kind + "/{model_name}/{model_version}", "version" + verb, "Run " + kind
                    + " on a version of a model.").path(MODEL, MODEL_DOC).path(VERSION, VERSION_DOC));
        }
        d.op("options", "/predictions/{model_name}", "modelApiDescription", "This API's OpenAPI description.")
                .path(MODEL, MODEL_DOC).jsonInline(200, "The OpenAPI description", "{\"type\": \"object\"}")
                .errors(401, 429);
        for (String op : new String[] {"predict", "explain"}) {
            handlerRoute(d.op("post", "/v1/models/{model_name}:" + op, "kserve" + capital(op), "KServe v1 " + op
                    + " on the default version (the kserve envelope reads the body).").path(MODEL, MODEL_DOC));
        }
        d.op("get", "/v1/models/{model_name}", "kserveModelReady", "KServe v1 model readiness: 503 while no worker "
                + "of the default version is READY (a ':suffix' on the name is ignored).").path(MODEL, MODEL_DOC)
                .json(200, "Ready", "V2ModelReady").json(503, "Not ready", "V2ModelReady").errors(401, 404, 429);
        kserveV2(d);
        handlerRoute(d.op("post", "/invocations", "invocations", "SageMaker: every query parameter and form field "
                + "becomes a handler input; the model is model_name (query or form), else the only registered model.")
                .query(MODEL, "string", "The model (required when more than one model is registered)."));
        handlerRoute(d.op("post", "/models/{model_name}/invoke", "invoke", "SageMaker multi-model endpoint: query "
                + "parameters and form fields become handler inputs.").path(MODEL, MODEL_DOC));
        handlerRoute(d.op("post", "/{model_name}/predict", "legacyPredict", "MMS' legacy prediction route (the "
                + "API's own names such as ping or predictions are not model names here: 404).").path(MODEL, MODEL_DOC));
        handlerRoute(d.op("post", "/{model_name}/{model_version}/predict", "legacyVersionPredict",
                "MMS' legacy prediction route for a version.").path(MODEL, MODEL_DOC).path(VERSION, VERSION_DOC));
        openAi(d);
    }

    /** The handler's input (any body) and answers of a route that reaches the model's handler. */
    private static OpenApiBuilder.Op handlerRoute(OpenApiBuilder.Op op) {
        return op.body(false, "The handler's input: a JSON or other body becomes the input 'body' (with its media "
                        + "type); each multipart or form field becomes an input of its name.",
                "application/json", ANY_JSON, "application/octet-stream", BINARY, "text/plain", "{\"type\": \"string\"}",
                "multipart/form-data", "{\"type\": \"object\", \"additionalProperties\": " + BINARY + "}",
                "application/x-www-form-urlencoded", "{\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}}")
                .handlerAnswer(200, "The handler's answer; its media type is the one the handler set (streamed as "
                        + "chunks when the handler streams)")
                .errors(HANDLER_ERRORS);
    }

    /** The Open Inference Protocol (KServe v2) routes: metadata, health, readiness, infer and explain. */
    private static void kserveV2(OpenApiBuilder d) {
        d.op("get", "/v2", "v2ServerMetadata", "OIP server metadata.").jsonInline(200, "Server metadata",
                "{\"type\": \"object\", \"required\": [\"name\", \"version\", \"extensions\"], \"properties\": {"
                + "\"name\": {\"type\": \"string\"}, \"version\": {\"type\": \"string\"},"
                + " \"extensions\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}}}").errors(401, 429);
        d.op("get", "/v2/health/live", "v2Live", "OIP liveness.").jsonInline(200, "Live",
                "{\"type\": \"object\", \"required\": [\"live\"], \"properties\": {\"live\": {\"type\": \"boolean\"}}}")
                .errors(401, 429);
        String ready = "{\"type\": \"object\", \"required\": [\"ready\"], \"properties\": {\"ready\": {\"type\": \"boolean\"}}}";
        d.op("get", "/v2/health/ready", "v2Ready", "OIP readiness: 503 while a model has no running worker or startup "
                + "models still load.").jsonInline(200, "Ready", ready).jsonInline(503, "Not ready", ready).errors(401, 429);
        d.schema("V2ModelMetadata", "{\"type\": \"object\", \"required\": [\"name\", \"versions\", \"platform\", \"inputs\","
                + " \"outputs\"], \"properties\": {\"name\": {\"type\": \"string\"}, \"versions\": {\"type\": \"array\", "
                + "\"items\": {\"type\": \"string\"}}, \"platform\": {\"type\": \"string\"}, \"inputs\": {\"type\": \"array\"},"
                + " \"outputs\": {\"type\": \"array\"}, \"version\": {\"type\": \"string\"}}}");
        d.schema("V2ModelReady", "{\"type\": \"object\", \"required\": [\"name\", \"ready\"], \"properties\": {"
                + "\"name\": {\"type\": \"string\"}, \"ready\": {\"type\": \"boolean\"}}}");
        String[] prefixes = {"/v2/models/{model_name}", "/v2/models/{model_name}/versions/{model_version}"};
        String[] ids = {"v2Model", "v2ModelVersion"};
        for (int i = 0; i < prefixes.length; i++) {
            boolean versioned = i == 1;
            withPath(d.op("get", prefixes[i], ids[i] + "Metadata", "OIP model metadata."), versioned)
                    .json(200, "Model metadata", "V2ModelMetadata").errors(401, 404, 429);
            withPath(d.op("get", prefixes[i] + "/ready", ids[i] + "Ready", "OIP model readiness: ready when a worker "
                    + "is READY."), versioned).json(200, "Ready", "V2ModelReady").json(503, "Not ready", "V2ModelReady")
                    .errors(401, 404, 429);
            for (String op : new String[] {"infer", "explain"}) {
                handlerRoute(withPath(d.op("post", prefixes[i] + "/" + op, ids[i] + capital(op), "OIP " + op
                        + " (the kservev2 envelope reads the InferenceRequest)."), versioned));
            }
            generate(d, prefixes[i], ids[i], versioned);
        }
    }

    /** The OIP generate extension: errors are {@code {"error": "..."}} on these routes (KServeGenerate). */
    private static void generate(OpenApiBuilder d, String prefix, String id, boolean versioned) {
        String error = "{\"type\": \"object\", \"required\": [\"error\"], \"properties\": {\"error\": {\"type\": "
                + "\"string\"}}}";
        String body = "{\"type\": \"object\", \"required\": [\"text_input\"], \"properties\": {\"text_input\": {"
                + "\"type\": \"string\"}, \"parameters\": {\"type\": \"object\", \"nullable\": true}}}";
        for (String op : new String[] {"generate", "generate_stream"}) {
            OpenApiBuilder.Op o = withPath(d.op("post", prefix + "/" + op, id + (op.equals("generate") ? "Generate"
                    : "GenerateStream"), op.equals("generate") ? "OIP generate extension: text_input in, text_output out "
                    + "(the model's handler reads the body)." : "OIP generate extension, streamed as Server-Sent Events "
                    + "(one text_output per event, done on the last)."), versioned)
                    .body(true, "A generate request: the frontend checks its shape (422), the model's handler the "
                            + "parameters.", "application/json", body)
                    .handlerAnswer(200, "The handler's generate answer (JSON), or text/event-stream for generate_stream")
                    .json(413, OpenApiBuilder.meaning(413), ERROR);
            for (int c : new int[] {400, 401, 404, 422, 429, 500, 503, 504, 507}) {
                o.jsonInline(c, OpenApiBuilder.meaning(c), error);
            }
        }
    }

    private static OpenApiBuilder.Op withPath(OpenApiBuilder.Op op, boolean versioned) {
        op.path(MODEL, MODEL_DOC);
        return versioned ? op.path(VERSION, VERSION_DOC) : op;
    }

    /** The OpenAI-compatible routes: /v1/... and TorchServe's /predictions/{m}[/{v}]/v1/... forms. */
    private static void openAi(OpenApiBuilder d) {
        String[] prefixes = {"", "/predictions/{model_name}", "/predictions/{model_name}/{model_version}"};
        String[] ids = {"openai", "openaiModel", "openaiModelVersion"};
        String[] which = {"", " (the path names the model; the body's model is ignored)",
            " (the path names the model and version; the body's model is ignored)"};
        for (int i = 0; i < prefixes.length; i++) {
            // the frontend checks only that the body is one JSON object and its model a registered name;
            // the rest (prompt, messages, stream, ...) is the model's handler's to check
            String body = i == 0
                    ? "{\"type\": \"object\", \"required\": [\"model\"], \"properties\": {\"model\": {\"type\": \"string\", "
                            + "\"minLength\": 1}}}"
                    : "{\"type\": \"object\", \"properties\": {\"model\": {\"type\": \"string\", \"nullable\": true}}}";
            for (String ep : new String[] {"completions", "chat/completions"}) {
                String id = ids[i] + (ep.equals("completions") ? "Completions" : "ChatCompletions");
                withModel(d.op("post", prefixes[i] + "/v1/" + ep, id, "OpenAI-compatible " + ep.replace('/', ' ')
                        + "; \"stream\": true answers Server-Sent Events" + which[i] + "."), i)
                        .body(true, "An OpenAI request object; the model's handler checks its fields.", "application/json", body)
                        .handlerAnswer(200, "The handler's OpenAI object (JSON), or text/event-stream when streaming")
                        .openAiErrors(400, 401, 404, 429, 500, 503, 504, 507)
                        .json(413, OpenApiBuilder.meaning(413), ERROR);
            }
            withModel(d.op("get", prefixes[i] + "/v1/models", ids[i] + "Models", i == 0
                    ? "OpenAI-compatible list of the registered models (default versions)."
                    : "OpenAI-compatible list holding the model the path names."), i)
                    .json(200, "The models", "OpenAiModelList").openAiErrors(i == 0 ? new int[] {401, 429}
                            : new int[] {401, 404, 429});
        }
    }

    private static OpenApiBuilder.Op withModel(OpenApiBuilder.Op op, int pathNames) {
        if (pathNames >= 1) {
            op.path(MODEL, MODEL_DOC);
        }
        return pathNames == 2 ? op.path(VERSION, VERSION_DOC) : op;
    }

    static String capital(String s) {
        return Character.toUpperCase(s.charAt(0)) + s.substring(1);
    }
}

package org.tserve.http;

import static io.netty.handler.codec.http.HttpMethod.GET;
import static io.netty.handler.codec.http.HttpMethod.OPTIONS;
import static io.netty.handler.codec.http.HttpMethod.POST;
import static org.tserve.http.OpenApiBuilder.ERROR;
import static org.tserve.http.OpenApiBuilder.STATUS;
import static org.tserve.http.Route.Errors.OIP;
import static org.tserve.http.Route.inference;

import io.netty.handler.codec.http.HttpMethod;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The inference connector's routes of {@link RouteTable} ({@link InferenceApi}, {@link KServeV2},
 * {@link KServeGenerate}, {@link OpenAiApi}, {@link WorkflowApi}'s /wfpredict): each with its
 * parameters, body and every status it answers.
 *
 * <p>Method handling follows TorchServe: {@code anyMethod} routes answer every method (their
 * handler may answer 405 itself); on the others another method is as an unknown path (404, or the
 * management API on the shared connector).
 */
final class InferenceRoutes {
    private InferenceRoutes() {
    }

    /** What a handler route answers besides the handler's own 200: the frontend's errors, then the handler's. */
    private static final int[] HANDLER_ERRORS = {400, 401, 404, 413, 429, 500, 503, 504, 507};
    private static final String ANY_JSON = "{}";
    private static final String BINARY = "{\"type\": \"string\", \"format\": \"binary\"}";
    private static final String DESCRIPTION = "{\"type\": \"object\"}";

    /** The answers' named schemas, in the document's order. */
    static Map<String, String> schemas() {
        Map<String, String> s = new LinkedHashMap<>();
        s.put("OpenAiModelList", "{\"type\": \"object\", \"required\": [\"object\", \"data\"], \"properties\": {"
                + "\"object\": {\"type\": \"string\", \"enum\": [\"list\"]}, \"data\": {\"type\": \"array\", \"items\": {"
                + "\"type\": \"object\", \"required\": [\"id\", \"object\", \"created\", \"owned_by\"], \"properties\": {"
                + "\"id\": {\"type\": \"string\"}, \"object\": {\"type\": \"string\"}, \"created\": {\"type\": \"integer\"},"
                + " \"owned_by\": {\"type\": \"string\"}}}}}}");
        s.put(OpenApiBuilder.OPENAI_ERROR, "{\"type\": \"object\", \"required\": [\"error\"], \"properties\": {\"error\": {"
                + "\"type\": \"object\", \"required\": [\"message\", \"type\"], \"properties\": {\"message\": {\"type\": \"string\"},"
                + " \"type\": {\"type\": \"string\"}, \"param\": {\"type\": \"string\", \"nullable\": true},"
                + " \"code\": {\"type\": \"string\", \"nullable\": true}}}}}");
        s.put("V2ModelMetadata", "{\"type\": \"object\", \"required\": [\"name\", \"versions\", \"platform\", \"inputs\","
                + " \"outputs\"], \"properties\": {\"name\": {\"type\": \"string\"}, \"versions\": {\"type\": \"array\", "
                + "\"items\": {\"type\": \"string\"}}, \"platform\": {\"type\": \"string\"}, \"inputs\": {\"type\": \"array\"},"
                + " \"outputs\": {\"type\": \"array\"}, \"version\": {\"type\": \"string\"}}}");
        s.put("ModelObjectAndReadiness", "{\"type\": \"object\", \"required\": [\"id\", \"object\", \"created\", "
                + "\"owned_by\", \"name\", \"ready\"], \"properties\": {\"id\": {\"type\": \"string\"}, \"object\": {"
                + "\"type\": \"string\"}, \"created\": {\"type\": \"integer\"}, \"owned_by\": {\"type\": \"string\"}, "
                + "\"name\": {\"type\": \"string\"}, \"ready\": {\"type\": \"boolean\"}}}");
        s.put(OpenApiBuilder.OIP_ERROR, "{\"type\": \"object\", \"required\": [\"error\"], \"properties\": {\"error\": {"
                + "\"type\": \"string\"}}}");
        s.put("V2ModelReady", "{\"type\": \"object\", \"required\": [\"name\", \"ready\"], \"properties\": {"
                + "\"name\": {\"type\": \"string\"}, \"ready\": {\"type\": \"boolean\"}}}");
        return s;
    }

    static List<Route> routes() {
        List<Route> r = new ArrayList<>();
        for (HttpMethod method : new HttpMethod[] {GET, POST}) {
            String m = method.name().toLowerCase(java.util.Locale.ROOT);
            Route ping = inference(method, "/ping", m + "Ping", "Server health (any method): Healthy or Partial "
                    + "Healthy (200), Unhealthy (500) while a model has no running worker or startup models still load.")
                    .auth(Route.Auth.INFERENCE_PROBE).handler(c -> c.apis.inference().ping(c))
                    .doc(op -> op.json(200, "Healthy or Partial Healthy", STATUS).json(500, "Unhealthy", STATUS)
                    .errors(401, 429));
            r.add(method.equals(GET) ? ping.anyMethod() : ping);
        }
        for (String kind : new String[] {"predictions", "explanations"}) {
            String verb = kind.equals("predictions") ? "Predictions" : "Explanations";
            boolean explain = kind.equals("explanations");
            r.add(handlerRoute(inference(POST, "/" + kind + "/{model_name}", kind, "Run " + kind + " on the default "
                    + "version of a model (any method but OPTIONS works; further path segments after the version reach "
                    + "the handler as the url_path header).")).anyMethod()
                    .handler(c -> c.apis.inference().predictions(c, explain)));
            r.add(handlerRoute(inference(POST, "/" + kind + "/{model_name}/{model_version}", "version" + verb, "Run "
                    + kind + " on a version of a model.")).anyMethod().tail()
                    .handler(c -> c.apis.inference().predictions(c, explain)));
        }
        r.add(inference(OPTIONS, "/predictions/{model_name}", "modelApiDescription", "This API's OpenAPI description.")
                .handler(c -> c.apis.inference().predictions(c, false))
                .doc(op -> op.jsonInline(200, "The OpenAPI description", DESCRIPTION).errors(401, 429)));
        for (String op : new String[] {"predict", "explain"}) {
            boolean explain = op.equals("explain");
            r.add(handlerRoute(inference(POST, "/v1/models/{model_name}:" + op, "kserve" + capital(op), "KServe v1 "
                    + op + " on the default version (the kserve envelope reads the body).")).otherMethodsNotHere()
                    .handler(c -> c.apis.inference().kserveV1(c, explain)));
        }
        r.add(inference(GET, "/v1/models/{model_name}", "kserveModelReady", "OpenAI's model object (models."
                + "retrieve) and KServe v1 model readiness in one answer: id, object, created, owned_by, name, ready; 503 "
                + "while no worker of the default version is READY (a ':suffix' on the name is ignored); errors are "
                + "OpenAI's.").auth(Route.Auth.INFERENCE_PROBE).otherMethodsNotHere().errorStyle(Route.Errors.OPENAI)
                .handler(c -> c.apis.inference().v1Model(c))
                .doc(op -> op.json(200, "Ready", "ModelObjectAndReadiness").json(503, "Not ready", "ModelObjectAndReadiness")
                .openAiErrors(401, 404, 429)));
        kserveV2(r);
        r.add(handlerRoute(inference(POST, "/invocations", "invocations", "SageMaker: every query parameter and form "
                + "field becomes a handler input; the model is model_name (query or form), else the only registered "
                + "model.")).anyMethod().handler(c -> c.apis.inference().invocations(c))
                .doc(op -> handlerAnswers(op.query(Route.MODEL, "string",
                        "The model (required when more than one model is registered)."), false)));
        r.add(handlerRoute(inference(POST, "/models/{model_name}/invoke", "invoke", "SageMaker multi-model endpoint: "
                + "query parameters and form fields become handler inputs.")).anyMethod()
                .handler(c -> c.apis.inference().legacy(c)));
        r.add(handlerRoute(inference(POST, "/{model_name}/predict", "legacyPredict", "MMS' legacy prediction route (the "
                + "API's own names such as ping or predictions are not model names here: 404)."))
                .anyMethod().fallback().handler(c -> c.apis.inference().legacy(c)));
        r.add(handlerRoute(inference(POST, "/{model_name}/{model_version}/predict", "legacyVersionPredict",
                "MMS' legacy prediction route for a version.")).anyMethod().fallback()
                .handler(c -> c.apis.inference().legacy(c)));
        openAi(r);
        r.add(inference(POST, "/wfpredict/{workflow_name}", "workflowPredict", "Run a workflow's DAG: the request's "
                + "inputs go to its start nodes; one leaf's answer, or a JSON object of every leaf's keyed by node.")
                .anyMethod().handler(c -> c.apis.workflows().predict(c))
                .doc(op -> op.body(false, "The first nodes' input: any body, or multipart/form fields as inputs of "
                        + "their names.", "application/json", ANY_JSON, "application/octet-stream", BINARY,
                        "text/plain", "{\"type\": \"string\"}")
                .handlerAnswer(200, "The leaf node's answer, or a JSON object of the leaves' answers")
                .errors(HANDLER_ERRORS)));
        r.add(inference(OPTIONS, "/wfpredict/{workflow_name}", "workflowApiDescription", "This API's OpenAPI description.")
                .handler(c -> c.apis.workflows().predict(c))
                .doc(op -> op.jsonInline(200, "The OpenAPI description", DESCRIPTION).errors(401, 429)));
        return r;
    }

    /** A route that reaches the model's handler: any body in, the handler's answer out. */
    private static Route handlerRoute(Route r) {
        return r.doc(op -> handlerAnswers(op, false));
    }

    /** The handler's input (any body) and answers of a route that reaches the model's handler ({@code oip}: /v2 errors). */
    private static void handlerAnswers(OpenApiBuilder.Op op, boolean oip) {
        op.body(false, "The handler's input: a JSON or other body becomes the input 'body' (with its media "
                        + "type); each multipart or form field becomes an input of its name.",
                "application/json", ANY_JSON, "application/octet-stream", BINARY, "text/plain", "{\"type\": \"string\"}",
                "multipart/form-data", "{\"type\": \"object\", \"additionalProperties\": " + BINARY + "}",
                "application/x-www-form-urlencoded", "{\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}}")
                .handlerAnswer(200, "The handler's answer; its media type is the one the handler set (streamed as "
                        + "chunks when the handler streams)");
        if (oip) {
            op.oipErrors(HANDLER_ERRORS);
        } else {
            op.errors(HANDLER_ERRORS);
        }
    }

    /** The Open Inference Protocol (KServe v2) routes: metadata, health, readiness, infer, explain, generate. */
    private static void kserveV2(List<Route> r) {
        r.add(inference(GET, "/v2", "v2ServerMetadata", "OIP server metadata.").otherMethodsNotHere().errorStyle(OIP)
                .handler(c -> KServeV2.serverMetadata(c))
                .doc(op -> op.jsonInline(200, "Server metadata", "{\"type\": \"object\", \"required\": [\"name\", "
                        + "\"version\", \"extensions\"], \"properties\": {\"name\": {\"type\": \"string\"}, \"version\": "
                        + "{\"type\": \"string\"}, \"extensions\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}}}")
                .oipErrors(401, 429)));
        r.add(inference(GET, "/v2/health/live", "v2Live", "OIP liveness.").auth(Route.Auth.INFERENCE_PROBE)
                .otherMethodsNotHere().errorStyle(OIP).handler(c -> KServeV2.live(c))
                .doc(op -> op.jsonInline(200, "Live", "{\"type\": \"object\", \"required\": [\"live\"], \"properties\": "
                        + "{\"live\": {\"type\": \"boolean\"}}}").oipErrors(401, 429)));
        String ready = "{\"type\": \"object\", \"required\": [\"ready\"], \"properties\": {\"ready\": {\"type\": \"boolean\"}}}";
        r.add(inference(GET, "/v2/health/ready", "v2Ready", "OIP readiness: 503 while a model has no running worker or "
                + "startup models still load.").auth(Route.Auth.INFERENCE_PROBE).otherMethodsNotHere().errorStyle(OIP)
                .handler(c -> KServeV2.ready(c))
                .doc(op -> op.jsonInline(200, "Ready", ready).jsonInline(503, "Not ready", ready).oipErrors(401, 429)));
        String[] prefixes = {"/v2/models/{model_name}", "/v2/models/{model_name}/versions/{model_version}"};
        String[] ids = {"v2Model", "v2ModelVersion"};
        for (int i = 0; i < prefixes.length; i++) {
            r.add(inference(GET, prefixes[i], ids[i] + "Metadata", "OIP model metadata.").otherMethodsNotHere()
                    .errorStyle(OIP)
                    .handler(c -> KServeV2.modelMetadata(c))
                    .doc(op -> op.json(200, "Model metadata", "V2ModelMetadata").oipErrors(401, 404, 429)));
            r.add(inference(GET, prefixes[i] + "/ready", ids[i] + "Ready", "OIP model readiness: ready when a worker "
                    + "is READY.").auth(Route.Auth.INFERENCE_PROBE).otherMethodsNotHere().errorStyle(OIP)
                    .handler(c -> KServeV2.modelReady(c))
                    .doc(op -> op.json(200, "Ready", "V2ModelReady").json(503, "Not ready", "V2ModelReady")
                    .oipErrors(401, 404, 429)));
            for (String op : new String[] {"infer", "explain"}) {
                boolean explain = op.equals("explain");
                r.add(inference(POST, prefixes[i] + "/" + op, ids[i] + capital(op), "OIP " + op
                        + " (the kservev2 envelope reads the InferenceRequest, JSON or binary tensor extension).")
                        .doc(o -> handlerAnswers(o, true)).otherMethodsNotHere().errorStyle(OIP)
                        .handler(c -> c.apis.inference().kserveV2(c, explain)));
            }
            generate(r, prefixes[i], ids[i]);
        }
    }

    /** The OIP generate extension: errors are {@code {"error": "..."}} on these routes (KServeGenerate). */
    private static void generate(List<Route> r, String prefix, String id) {
        String error = "{\"type\": \"object\", \"required\": [\"error\"], \"properties\": {\"error\": {\"type\": "
                + "\"string\"}}}";
        String body = "{\"type\": \"object\", \"required\": [\"text_input\"], \"properties\": {\"text_input\": {"
                + "\"type\": \"string\"}, \"parameters\": {\"type\": \"object\", \"nullable\": true}}}";
        for (String op : new String[] {"generate", "generate_stream"}) {
            boolean stream = op.equals("generate_stream");
            r.add(inference(POST, prefix + "/" + op, id + (stream ? "GenerateStream" : "Generate"), stream
                    ? "OIP generate extension, streamed as Server-Sent Events (one text_output per event, done on the "
                    + "last)." : "OIP generate extension: text_input in, text_output out (the model's handler reads "
                    + "the body).").anyMethod().errorStyle(Route.Errors.OIP)
                    .handler(c -> c.apis.inference().generate(c, stream))
                    .doc(o -> {
                        o.body(true, "A generate request: the frontend checks its shape (422), the model's handler the "
                                + "parameters.", "application/json", body)
                                .handlerAnswer(200, "The handler's generate answer (JSON), or text/event-stream for "
                                        + "generate_stream")
                                .json(413, OpenApiBuilder.meaning(413), ERROR);
                        for (int code : new int[] {400, 401, 404, 422, 429, 500, 503, 504, 507}) {
                            o.jsonInline(code, OpenApiBuilder.meaning(code), error);
                        }
                    }));
        }
    }

    /** The OpenAI-compatible routes: /v1/... and TorchServe's /predictions/{m}[/{v}]/v1/... forms. */
    private static void openAi(List<Route> r) {
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
                r.add(inference(POST, prefixes[i] + "/v1/" + ep, id, "OpenAI-compatible " + ep.replace('/', ' ')
                        + "; \"stream\": true answers Server-Sent Events" + which[i] + ".").anyMethod()
                        .errorStyle(Route.Errors.OPENAI).handler(c -> c.apis.inference().openAi(c, ep))
                        .doc(op -> op.body(true, "An OpenAI request object; the model's handler checks its fields.",
                                "application/json", body)
                        .handlerAnswer(200, "The handler's OpenAI object (JSON), or text/event-stream when streaming")
                        .openAiErrors(400, 401, 404, 429, 500, 503, 504, 507)
                        .json(413, OpenApiBuilder.meaning(413), ERROR)));
            }
            int[] errors = i == 0 ? new int[] {401, 429} : new int[] {401, 404, 429};
            r.add(inference(GET, prefixes[i] + "/v1/models", ids[i] + "Models", i == 0
                    ? "OpenAI-compatible list of the registered models (default versions)."
                    : "OpenAI-compatible list holding the model the path names.").anyMethod()
                    .errorStyle(Route.Errors.OPENAI).handler(c -> c.apis.inference().openAi(c, "models"))
                    .doc(op -> op.json(200, "The models", "OpenAiModelList").openAiErrors(errors)));
        }
    }

    static String capital(String s) {
        return Character.toUpperCase(s.charAt(0)) + s.substring(1);
    }
}

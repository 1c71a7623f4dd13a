package org.tserve.http;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import com.google.gson.stream.JsonReader;
import com.google.gson.stream.JsonToken;
import io.netty.buffer.ByteBufUtil;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpMethod;
import java.io.IOException;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.api.Header;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.ModelSummary;
import org.tserve.wlm.api.Part;
import org.tserve.wlm.api.WlmException;

/**
 * The OpenAI-compatible API on the inference port: {@code POST /v1/completions},
 * {@code POST /v1/chat/completions}, {@code GET /v1/models}, and TorchServe's forms
 * {@code /predictions/{model}[/{version}]/v1/...} (there the path names the model, not the body).
 *
 * <p>The frontend only checks the request (a JSON object naming a registered model) and routes it:
 * the model's handler gets the original body with the header {@code x-tserve-openai} =
 * {@code completions} | {@code chat.completions} and answers OpenAI's objects itself (also the SSE
 * stream for {@code "stream": true} and its own errors). Errors the frontend gives on these routes
 * are OpenAI-shaped ({@link OpenAiError}).
 */
final class OpenAiApi {
    /** The header telling the handler which OpenAI endpoint was called (absent on /predictions calls). */
    static final String HEADER = "x-tserve-openai";

    private final ModelManager models;
    private final ApiDescription description;

    OpenAiApi(ModelManager models, ApiDescription description) {
        this.models = models;
        this.description = description;
    }

    /**
     * An OpenAI route: the endpoint ({@code completions}, {@code chat/completions} or
     * {@code models}) and the model and version the path names (null on {@code /v1/...}).
     */
    record Route(String endpoint, String model, String version) {
        /** The value of {@link #HEADER}: OpenAI's object prefix for the endpoint. */
        String kind() {
            return endpoint.replace('/', '.');
        }
    }

    /** Answers (or submits) a request on {@code route}; its exchange already gives OpenAI-shaped errors. */
    void handle(Exchange ex, FullHttpRequest req, Route route) throws HttpError {
        if (req.method().equals(HttpMethod.OPTIONS)) {
            ex.sendJson(200, description.inference());
            return;
        }
        if (route.endpoint().equals("models")) {
            if (!req.method().equals(HttpMethod.GET)) {
                throw methodNotAllowed(req, "GET");
            }
            ex.sendJson(200, modelList(route));
            return;
        }
        if (!req.method().equals(HttpMethod.POST)) {
            throw methodNotAllowed(req, "POST");
        }
        byte[] body = ByteBufUtil.getBytes(req.content());
        String bodyModel;
        try {
            bodyModel = modelField(new String(body, StandardCharsets.UTF_8));
        } catch (IOException | IllegalStateException | NumberFormatException e) {
            throw new HttpError(400, "We could not parse the JSON body of your request: it must be one JSON object ("
                    + parseProblem(e) + ").");
        } catch (ModelFieldException e) {
            ex.sendOpenAiError(new OpenAiError(400, e.getMessage(), "model", null));
            return;
        }
        String model = route.model() != null ? route.model() : bodyModel;
        if (model == null) {
            ex.sendOpenAiError(new OpenAiError(400, "You must provide a model parameter (the name of a registered model).",
                    "model", null));
            return;
        }
        submit(ex, req, route, model, body);
    }

    private void submit(Exchange ex, FullHttpRequest req, Route route, String model, byte[] body) throws HttpError {
        List<Header> extra = List.of(new Header("url_path", "v1/" + route.endpoint()),   // TorchServe's vllm handler reads it
                new Header("explain", "False"));
        try {
            submitForm(models, ex, req, model, route.version(), route.kind(), extra, body);
        } catch (WlmException e) {
            throw new HttpError(e.getStatus(), e.getStatus() == 404 ? notFound(model, route.version(), e) : e.getMessage());
        }
    }

    /**
     * Submits {@code body} to the model's handler with {@link #HEADER} = {@code form} (the request
     * form it answers in) and {@code extra} headers; a closed connection cancels the job.
     */
    static void submitForm(ModelManager models, Exchange ex, FullHttpRequest req, String model, String version,
            String form, List<Header> extra, byte[] body) throws WlmException {
        List<Header> headers = InputParser.headers(req, 3);
        headers.removeIf(h -> h.name().equalsIgnoreCase(HEADER) || h.name().equalsIgnoreCase(Job.STREAM_HINT.name()));
        headers.addAll(extra);
        headers.add(new Header(HEADER, form));
        List<Part> parts = List.of(new Part("body", "application/json", body));
        HttpJobResponder responder = new HttpJobResponder(ex);
        ex.model = model;   // for the access log
        Job job = new Job(ex.requestId, model, version, headers, parts, responder);
        models.submit(job);
        responder.cancelOnClose(job);
    }

    private static String notFound(String model, String version, WlmException e) {
        return version == null ? "The model `" + model + "` does not exist or is not registered on this server."
                : e.getMessage();
    }

    /**
     * {@code GET /v1/models/{id}} on the inference port: OpenAI's model object ({@code models.retrieve})
     * with KServe v1's readiness fields {@code name} and {@code ready} (KServe's SDK reads {@code ready}
     * at the same path): 200 when a worker of the default version is READY, 503 when not, 404 (OpenAI's
     * shape) when no model has the id.
     */
    void modelObject(Exchange ex, String id) throws HttpError {
        ModelSummary m;
        try {
            m = models.summary(id, null);
        } catch (WlmException e) {
            throw new HttpError(e.getStatus(), notFound(id, null, e));
        }
        boolean ready = ModelReadiness.ready(models, id, null);
        JsonObject o = modelJson(m);
        o.addProperty("name", m.name());
        o.addProperty("ready", ready);
        ex.sendJson(ready ? 200 : 503, o);
    }

    private static JsonObject modelJson(ModelSummary m) {
        JsonObject o = new JsonObject();
        o.addProperty("id", m.name());
        o.addProperty("object", "model");
        o.addProperty("created", m.registeredAtMillis() / 1000);
        o.addProperty("owned_by", "tserve");
        return o;
    }

    /** OpenAI's model list: the default version of every model, or the one the path names. */
    private JsonObject modelList(Route route) throws HttpError {
        List<ModelSummary> list;
        if (route.model() == null) {
            list = models.summaries();
        } else {
            try {
                list = List.of(models.summary(route.model(), route.version()));
            } catch (WlmException e) {
                throw new HttpError(e.getStatus(), notFound(route.model(), route.version(), e));
            }
        }
        JsonArray data = new JsonArray();
        for (ModelSummary m : list) {
            data.add(modelJson(m));
        }
        JsonObject o = new JsonObject();
        o.addProperty("object", "list");
        o.add("data", data);
        return o;
    }

    /**
     * Where and what the JSON problem is, in the client's terms: Gson's messages name its own API
     * ("Use JsonReader.setLenient") and a troubleshooting link, which mean nothing to the caller.
     */
    static String parseProblem(Exception e) {
        String m = String.valueOf(e.getMessage());
        java.util.regex.Matcher at = java.util.regex.Pattern.compile("line (\\d+) column (\\d+)").matcher(m);
        if (m.contains("setLenient") || m.contains("Troubleshooting")) {
            return at.find() ? "malformed JSON at line " + at.group(1) + " column " + at.group(2) : "malformed JSON";
        }
        if (e instanceof java.io.EOFException) {
            return "the body ends before the JSON object does";
        }
        int newline = m.indexOf('\n');
        return newline < 0 ? m : m.substring(0, newline);
    }

    private static HttpError methodNotAllowed(FullHttpRequest req, String allowed) {
        return new HttpError(405, "Method " + req.method() + " is not allowed here; use " + allowed + ".");
    }

    /** The body's top-level {@code model} is there but not a string. */
    private static final class ModelFieldException extends Exception {
        private static final long serialVersionUID = 1L;

        ModelFieldException(String message) {
            super(message);
        }
    }

    /**
     * The top-level {@code model} of a JSON object body (null when absent). Reads the body as a
     * stream: values are skipped without building a tree (deep nesting cannot exhaust the stack).
     */
    static String modelField(String body) throws IOException, ModelFieldException {
        JsonReader r = new JsonReader(new StringReader(body));
        // only the top level is read; deeper values are skipped without recursion (the worker judges them),
        // and the request size already bounds the reader's depth stack
        r.setNestingLimit(Integer.MAX_VALUE);
        if (r.peek() != JsonToken.BEGIN_OBJECT) {
            throw new IllegalStateException("found " + r.peek().name().toLowerCase(java.util.Locale.ROOT));
        }
        r.beginObject();
        String model = null;
        while (r.hasNext()) {
            String name = r.nextName();
            if (name.equals("model") && model == null) {
                if (r.peek() == JsonToken.NULL) {
                    r.nextNull();
                } else if (r.peek() != JsonToken.STRING) {
                    throw new ModelFieldException("model must be a string, the name of a registered model.");
                } else {
                    model = r.nextString();
                }
            } else {
                r.skipValue();
            }
        }
        r.endObject();
        if (r.peek() != JsonToken.END_DOCUMENT) {
            throw new IllegalStateException("more after the object");
        }
        return model == null || model.isEmpty() ? null : model;
    }
}

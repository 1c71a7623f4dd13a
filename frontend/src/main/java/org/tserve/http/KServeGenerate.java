package org.tserve.http;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import io.netty.buffer.ByteBufUtil;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpMethod;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.tserve.util.Json;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.WlmException;

/**
 * The Open Inference Protocol's generate extension: {@code POST /v2/models/{m}[/versions/{v}]/generate}
 * and {@code .../generate_stream} (Server-Sent Events). As on the OpenAI routes, the frontend only
 * routes: the model's handler gets the body as sent, with {@code x-tserve-openai: generate} (and
 * {@code x-tserve-stream: true} for generate_stream), and answers the extension's objects
 * ({@code text_output}, {@code model_name}; {@code done} on each event) and its errors itself.
 */
final class KServeGenerate {
    private KServeGenerate() {
    }

    /** {@code v2/models/{m}[/versions/{v}]/generate|generate_stream} (any method: another than POST is 405). */
    static void handle(ModelManager models, Exchange ex, FullHttpRequest req, String model, String version,
                       boolean stream) throws HttpError {
        if (!req.method().equals(HttpMethod.POST)) {
            throw new HttpError(405, "Method " + req.method() + " is not allowed here; use POST.");
        }
        byte[] body = ByteBufUtil.getBytes(req.content());
        checkBody(new String(body, StandardCharsets.UTF_8));
        try {
            OpenAiApi.submitForm(models, ex, req, model, version, "generate",
                    stream ? List.of(Job.STREAM_HINT) : List.of(), body);
        } catch (WlmException e) {
            throw new HttpError(e.getStatus(), e.getMessage());
        }
    }

    /**
     * The extension's request shape, checked here so every handler gets a well-formed one: one JSON
     * object with a string {@code text_input} and, if given, an object {@code parameters} (422 otherwise).
     */
    static void checkBody(String text) throws HttpError {
        JsonElement body;
        try {
            body = Json.parse(text);
        } catch (JsonParseException e) {
            throw new HttpError(422, "The body must be one JSON object with a string text_input: " + e.getMessage());
        }
        if (body == null || !body.isJsonObject()) {
            throw new HttpError(422, "The body must be one JSON object with a string text_input, got "
                    + (body == null || body.isJsonNull() ? "null" : body.isJsonArray() ? "an array" : "a " + kind(body)));
        }
        JsonObject o = body.getAsJsonObject();
        JsonElement input = o.get("text_input");
        if (input == null || !input.isJsonPrimitive() || !input.getAsJsonPrimitive().isString()) {
            throw new HttpError(422, "text_input must be a string (the prompt)");
        }
        JsonElement params = o.get("parameters");
        if (params != null && !params.isJsonNull() && !params.isJsonObject()) {
            throw new HttpError(422, "parameters must be an object (e.g. {\"max_tokens\": 16})");
        }
    }

    private static String kind(JsonElement e) {
        return e.isJsonPrimitive() && e.getAsJsonPrimitive().isString() ? "string" : "number or boolean";
    }
}

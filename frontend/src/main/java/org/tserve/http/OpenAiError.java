package org.tserve.http;

import com.google.gson.Gson;
import com.google.gson.GsonBuilder;
import com.google.gson.JsonObject;

/**
 * An error in OpenAI's shape, {@code {"error": {"message", "type", "param", "code"}}}: what the
 * frontend answers on the OpenAI-compatible routes ({@link OpenAiApi}) instead of TorchServe's
 * {@code {"code", "type", "message"}}. Type and code follow OpenAI's API for the status.
 */
final class OpenAiError {
    /** One line (an SSE {@code data:} field must not span lines). */
    private static final Gson COMPACT = new GsonBuilder().disableHtmlEscaping().serializeNulls().create();

    final int status;
    final String message;
    final String type;
    final String param;
    final String code;

    OpenAiError(int status, String message, String param, String code) {
        this.status = status;
        this.message = message;
        this.type = typeFor(status);
        this.param = param;
        this.code = code;
    }

    /** The error for a status with OpenAI's code for it; a 404 on these routes is always the model's. */
    static OpenAiError of(int status, String message) {
        return new OpenAiError(status, message, status == 404 ? "model" : null, codeFor(status));
    }

    /** OpenAI's error type for an HTTP status. */
    static String typeFor(int status) {
        switch (status) {
            case 401: return "invalid_request_error";
            case 403: return "permission_error";
            case 408: return "timeout_error";
            case 429: return "rate_limit_error";
            default: return status >= 500 ? "server_error" : "invalid_request_error";
        }
    }

    /** OpenAI's error code for an HTTP status, or null where OpenAI gives none. */
    static String codeFor(int status) {
        switch (status) {
            case 401: return "invalid_api_key";
            case 404: return "model_not_found";
            case 405: return "method_not_allowed";
            case 408: return "timeout";
            case 413: return "request_too_large";
            case 429: return "rate_limit_exceeded";
            case 503: return "service_unavailable";
            case 504: return "timeout";
            default: return null;
        }
    }

    /** Whether a client should retry later (the answer carries {@code Retry-After}). */
    boolean retryable() {
        return status == 429 || status == 503;
    }

    JsonObject toJson() {
        JsonObject e = new JsonObject();
        e.addProperty("message", message);
        e.addProperty("type", type);
        e.addProperty("param", param);
        e.addProperty("code", code);
        JsonObject o = new JsonObject();
        o.add("error", e);
        return o;
    }

    /** The error as one line of JSON. */
    String compactJson() {
        return COMPACT.toJson(toJson());
    }

    /** The error as one Server-Sent Event ({@code data: {...}}), for a stream that fails after it started. */
    String sseEvent() {
        return "data: " + compactJson() + "\n\n";
    }
}

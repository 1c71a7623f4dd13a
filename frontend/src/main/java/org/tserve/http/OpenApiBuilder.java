package org.tserve.http;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

/**
 * Builds one OpenAPI 3.0.1 document ({@link ApiDescription}): operations with their parameters,
 * request bodies and every status they answer, and the shared schemas of the answers
 * ({@code #/components/schemas/...}).
 */
final class OpenApiBuilder {
    /** TorchServe's error body, {@code {"code", "type", "message"}}. */
    static final String ERROR = "ErrorResponse";
    /** OpenAI's error body on the OpenAI-compatible routes. */
    static final String OPENAI_ERROR = "OpenAiError";
    /** The Open Inference Protocol's error body, {@code {"error": "..."}} (the /v2 routes). */
    static final String OIP_ERROR = "OipError";
    /** {@code {"status": "..."}} (TorchServe's StatusResponse). */
    static final String STATUS = "StatusResponse";

    private final JsonObject doc = new JsonObject();
    private final JsonObject paths = new JsonObject();
    private final JsonObject schemas = new JsonObject();

    OpenApiBuilder(String title, String description) {
        doc.addProperty("openapi", "3.0.1");
        JsonObject info = new JsonObject();
        info.addProperty("title", title);
        info.addProperty("description", description);
        info.addProperty("version", org.tserve.server.ServerVersion.get());
        doc.add("info", info);
        doc.add("paths", paths);
        JsonObject components = new JsonObject();
        components.add("schemas", schemas);
        doc.add("components", components);
        schema(ERROR, "{\"type\": \"object\", \"required\": [\"code\", \"type\", \"message\"], \"properties\": {"
                + "\"code\": {\"type\": \"integer\"}, \"type\": {\"type\": \"string\"}, \"message\": {\"type\": \"string\"}}}");
        schema(STATUS, "{\"type\": \"object\", \"required\": [\"status\"], \"properties\": {\"status\": {\"type\": \"string\"}}}");
    }

    /** Adds a named schema (JSON text) under components; refer to it with {@link #ref}. */
    OpenApiBuilder schema(String name, String json) {
        schemas.add(name, JsonParser.parseString(json));
        return this;
    }

    static JsonObject ref(String schema) {
        JsonObject r = new JsonObject();
        r.addProperty("$ref", "#/components/schemas/" + schema);
        return r;
    }

    /** A new operation {@code method path}; its parameters and answers are added on the returned object. */
    Op op(String method, String path, String operationId, String description) {
        JsonObject p = paths.has(path) ? paths.getAsJsonObject(path) : new JsonObject();
        paths.add(path, p);
        Op op = new Op(this);
        op.o.addProperty("operationId", operationId);
        op.o.addProperty("description", description);
        op.o.add("parameters", new JsonArray());
        op.o.add("responses", new JsonObject());
        p.add(method, op.o);
        return op;
    }

    /** Marks every operation as needing {@code Authorization: Bearer <key>} (token authorization on). */
    OpenApiBuilder bearerAuth(String description) {
        JsonObject scheme = new JsonObject();
        scheme.addProperty("type", "http");
        scheme.addProperty("scheme", "bearer");
        scheme.addProperty("description", description);
        JsonObject schemes = new JsonObject();
        schemes.add("bearerAuth", scheme);
        doc.getAsJsonObject("components").add("securitySchemes", schemes);
        JsonObject need = new JsonObject();
        need.add("bearerAuth", new JsonArray());
        JsonArray security = new JsonArray();
        security.add(need);
        doc.add("security", security);
        return this;
    }

    JsonObject json() {
        return doc;
    }

    /** What each status means, for the responses' descriptions. */
    static String meaning(int code) {
        switch (code) {
            case 200: return "OK";
            case 202: return "Accepted: worker updates in progress";
            case 400: return "Bad request: the message names the parameter and what it accepts";
            case 401: return "Missing or wrong token (the message names the key to send)";
            case 403: return "Forbidden: the default version cannot be removed while other versions exist";
            case 404: return "Model, version or resource not found";
            case 405: return "Method not allowed, or the model API is disabled (enable_model_api)";
            case 409: return "Conflict: that model version is already registered, or the archive file already exists";
            case 413: return "Request body larger than max_request_size (or a download above max_download_size)";
            case 429: return "Too many requests: retry after the Retry-After header's seconds";
            case 500: return "The model's handler or worker failed (the message says how)";
            case 503: return "No worker to serve the request, job queue full, or not ready";
            case 504: return "The handler did not answer within the model's responseTimeout";
            case 507: return "Out of resources: a worker could not start, or the handler ran out of memory";
            default: return "Error";
        }
    }

    /** One operation of the document. */
    static final class Op {
        final JsonObject o = new JsonObject();
        private final OpenApiBuilder doc;

        private Op(OpenApiBuilder doc) {
            this.doc = doc;
        }

        private Op param(String in, String name, String description, boolean required, JsonObject schema) {
            JsonObject x = new JsonObject();
            x.addProperty("in", in);
            x.addProperty("name", name);
            x.addProperty("description", description);
            x.addProperty("required", required);
            boolean array = schema.has("type") && schema.get("type").getAsString().equals("array");
            if (in.equals("query") && !required && !array) {
                x.addProperty("allowEmptyValue", true);   // name= counts as not given (Params)
            }
            x.add("schema", schema);
            o.getAsJsonArray("parameters").add(x);
            return this;
        }

        /** A path parameter: one non-empty segment. */
        Op path(String name, String description) {
            return param("path", name, description, true, parse("{\"type\": \"string\", \"minLength\": 1}"));
        }

        /** An optional query parameter of a JSON schema type (string, integer, boolean); empty is as absent. */
        Op query(String name, String type, String description) {
            return param("query", name, description, false, parse("{\"type\": \"" + type + "\"}"));
        }

        /** An optional query parameter with a schema of its own (JSON text). */
        Op querySchema(String name, String schema, String description) {
            return param("query", name, description, false, parse(schema));
        }

        /** A required query parameter of a JSON schema type. */
        Op requiredQuery(String name, String type, String description) {
            return param("query", name, description, true, parse("{\"type\": \"" + type + "\"}"));
        }

        /** The request body: media type to schema (JSON text), in the order given. */
        Op body(boolean required, String description, String... mediaTypeAndSchema) {
            JsonObject content = new JsonObject();
            for (int i = 0; i < mediaTypeAndSchema.length; i += 2) {
                JsonObject media = new JsonObject();
                media.add("schema", parse(mediaTypeAndSchema[i + 1]));
                content.add(mediaTypeAndSchema[i], media);
            }
            JsonObject b = new JsonObject();
            b.addProperty("description", description);
            b.addProperty("required", required);
            b.add("content", content);
            o.add("requestBody", b);
            return this;
        }

        /** A JSON answer with a named schema. */
        Op json(int code, String description, String schema) {
            return answer(code, description, "application/json", ref(schema));
        }

        /** A JSON answer with an inline schema (JSON text). */
        Op jsonInline(int code, String description, String schema) {
            return answer(code, description, "application/json", parse(schema));
        }

        /** An answer whose body and media type the model's handler chooses (none documented). */
        Op handlerAnswer(int code, String description) {
            JsonObject r = new JsonObject();
            r.addProperty("description", description);
            o.getAsJsonObject("responses").add(Integer.toString(code), r);
            return this;
        }

        /** An answer with a text media type (e.g. Prometheus' text format, Server-Sent Events). */
        Op text(int code, String description, String mediaType) {
            return answer(code, description, mediaType, parse("{\"type\": \"string\"}"));
        }

        /** TorchServe's error body for each code. */
        Op errors(int... codes) {
            for (int c : codes) {
                json(c, meaning(c), ERROR);
            }
            return this;
        }

        /** The Open Inference Protocol's error body for each code; 413 comes before routing, TorchServe's. */
        Op oipErrors(int... codes) {
            for (int c : codes) {
                json(c, meaning(c), c == 413 ? ERROR : OIP_ERROR);
            }
            return this;
        }

        /** OpenAI's error body for each code. */
        Op openAiErrors(int... codes) {
            for (int c : codes) {
                json(c, meaning(c), OPENAI_ERROR);
            }
            return this;
        }

        private Op answer(int code, String description, String mediaType, JsonElement schema) {
            JsonObject responses = o.getAsJsonObject("responses");
            String key = Integer.toString(code);
            JsonObject r = responses.has(key) ? responses.getAsJsonObject(key) : new JsonObject();
            r.addProperty("description", description);
            JsonObject content = r.has("content") ? r.getAsJsonObject("content") : new JsonObject();
            JsonObject media = new JsonObject();
            media.add("schema", schema);
            content.add(mediaType, media);
            r.add("content", content);
            responses.add(key, r);
            return this;
        }

        /** No token needed for this operation (the API descriptions). */
        Op noAuth() {
            o.add("security", new JsonArray());
            return this;
        }

        OpenApiBuilder done() {
            return doc;
        }
    }

    static JsonObject parse(String json) {
        return JsonParser.parseString(json).getAsJsonObject();
    }
}

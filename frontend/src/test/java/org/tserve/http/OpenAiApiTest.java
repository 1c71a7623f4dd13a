package org.tserve.http;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import io.netty.handler.codec.http.HttpMethod;
import java.util.Map;
import org.junit.Test;

/** OpenAI routes, the body's model field and OpenAI's error shape, without a server. */
public class OpenAiApiTest {
    /** The OpenAI route the route table finds for a path (any method), or null. */
    private static OpenAiApi.Route route(String path) {
        String[] seg = RequestHandler.segments(path);
        Route r = RouteTable.match(RouteTable.of(Route.Api.INFERENCE, false), seg, HttpMethod.PATCH).route();
        if (r == null || r.errors != Route.Errors.OPENAI) {
            return null;
        }
        Map<String, String> p = RouteTable.pathParams(r, seg);
        return new OpenAiApi.Route(r.path.substring(r.path.indexOf("/v1/") + 4), p.get(Route.MODEL), p.get(Route.VERSION));
    }

    private static void assertRoute(String path, String endpoint, String model, String version) {
        OpenAiApi.Route r = route(path);
        assertEquals(path, new OpenAiApi.Route(endpoint, model, version), r);
    }

    @Test
    public void routesAreTheV1FormsAndTorchServesPredictionForms() {
        assertRoute("/v1/completions", "completions", null, null);
        assertRoute("/v1/chat/completions/", "chat/completions", null, null);
        assertRoute("/v1/models", "models", null, null);
        assertRoute("/predictions/m/v1/completions", "completions", "m", null);
        assertRoute("/predictions/m/1.0/v1/chat/completions", "chat/completions", "m", "1.0");
        assertRoute("/predictions/m/2/v1/models", "models", "m", "2");
        // a version called v1 is still reachable
        assertRoute("/predictions/m/v1/v1/completions", "completions", "m", "v1");
        for (String p : new String[] {"/v1", "/v1/models/m:predict", "/v1/chat", "/v1/embeddings", "/predictions/m",
            "/predictions/m/v1", "/predictions/m/1.0/v1", "/predictions/m/1.0/completions", "/v2/completions",
            "/predictions/v1/completions", "/explanations/m/v1/completions"}) {
            assertNull(p, route(p));
        }
        assertEquals("chat.completions", route("/v1/chat/completions").kind());
        assertEquals("completions", route("/v1/completions").kind());
    }

    @Test
    public void modelFieldIsReadFromTheTopLevelObjectOnly() throws Exception {
        assertEquals("m", OpenAiApi.modelField("{\"messages\": [{\"model\": \"inner\"}], \"model\": \"m\"}"));
        assertNull(OpenAiApi.modelField("{\"prompt\": \"x\"}"));
        assertNull(OpenAiApi.modelField("{\"model\": null}"));
        assertNull(OpenAiApi.modelField(" {\"model\": \"\"} \n"));
        String deep = "{\"a\": " + "[".repeat(100_000) + "]".repeat(100_000) + ", \"model\": \"m\"}";
        assertEquals("m", OpenAiApi.modelField(deep));
        for (String bad : new String[] {"", "[]", "\"m\"", "{", "{\"model\": \"m\"", "{} []", "{\"model\": \"m\",}"}) {
            try {
                OpenAiApi.modelField(bad);
                fail("accepted " + bad);
            } catch (java.io.IOException | IllegalStateException e) {
                // refused: 400
            }
        }
        try {
            OpenAiApi.modelField("{\"model\": [\"m\"]}");
            fail("accepted a list as the model");
        } catch (Exception e) {
            assertTrue(e.getMessage(), e.getMessage().contains("string"));
        }
    }

    @Test
    public void parseProblemsNameTheSpotNotGsonsApi() {
        for (String body : new String[] {"not json", "{\"model\": x", "{'a' 1}"}) {
            try {
                OpenAiApi.modelField(body);
                fail("parsed " + body);
            } catch (Exception e) {
                String p = OpenAiApi.parseProblem(e);
                assertTrue(p, p.startsWith("malformed JSON") || p.startsWith("the body ends") || p.startsWith("found"));
                assertTrue(p, !p.contains("setLenient") && !p.contains("http") && !p.contains("\n"));
            }
        }
        assertEquals("the body ends before the JSON object does", OpenAiApi.parseProblem(new java.io.EOFException("x")));
        assertEquals("found number", OpenAiApi.parseProblem(new IllegalStateException("found number\nmore")));
    }

    @Test
    public void errorsHaveOpenAisShapeTypeAndCode() {
        JsonObject e = JsonParser.parseString(OpenAiError.of(404, "no such model").compactJson()).getAsJsonObject()
                .getAsJsonObject("error");
        assertEquals("no such model", e.get("message").getAsString());
        assertEquals("invalid_request_error", e.get("type").getAsString());
        assertEquals("model", e.get("param").getAsString());
        assertEquals("model_not_found", e.get("code").getAsString());
        JsonObject s = JsonParser.parseString(OpenAiError.of(500, "boom").compactJson()).getAsJsonObject()
                .getAsJsonObject("error");
        assertEquals("server_error", s.get("type").getAsString());
        assertTrue(s.get("param").isJsonNull());
        assertTrue(s.get("code").isJsonNull());
        assertEquals("rate_limit_error", OpenAiError.typeFor(429));
        assertEquals("server_error", OpenAiError.typeFor(503));
        assertEquals("invalid_request_error", OpenAiError.typeFor(400));
        assertTrue(OpenAiError.of(503, "x").retryable());
        assertTrue(OpenAiError.of(429, "x").retryable());
        assertTrue(!OpenAiError.of(500, "x").retryable());
        String sse = OpenAiError.of(500, "line one\nline two").sseEvent();
        assertTrue(sse, sse.startsWith("data: {\"error\": ") || sse.startsWith("data: {\"error\":"));
        assertTrue(sse.endsWith("\n\n"));
        assertEquals("an SSE data field is one line", 1, sse.trim().split("\n").length);
    }
}

package org.tserve.http;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.File;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.HashMap;
import java.util.List;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.tserve.auth.TokenAuthorization;
import org.tserve.config.Arguments;
import org.tserve.config.ConfigManager;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.supervision.WorkerEnvironment;

/** Routing, error shapes and token checks of the REST connectors (no model needed). */
public class RoutingTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();
    private HttpServer server;
    private ModelManager models;
    private int inf;
    private int mgmt;
    private TokenAuthorization tokens;
    private final HttpClient client = HttpClient.newHttpClient();

    private void start(String extra, boolean tokenAuth) throws Exception {
        // Both held open while picked, so the kernel cannot hand the same number out twice.
        try (ServerSocket a = new ServerSocket(0); ServerSocket b = new ServerSocket(0)) {
            inf = a.getLocalPort();
            mgmt = b.getLocalPort();
        }
        File f = tmp.newFile();
        String props = "inference_address=http://127.0.0.1:" + inf + "\nmanagement_address=http://127.0.0.1:" + mgmt
                + "\nenable_metrics_api=false\nmax_request_size=1000\nmodel_store=" + tmp.getRoot() + "\n"
                + "disable_token_authorization=" + !tokenAuth + "\n" + extra;
        Files.write(f.toPath(), props.getBytes(StandardCharsets.UTF_8));
        ConfigManager cfg = new ConfigManager(Arguments.parse(new String[] {"-f", f.getPath()}), new HashMap<>());
        tokens = new TokenAuthorization(cfg.isTokenAuthEnabled(), tmp.getRoot().toPath().resolve("key_file.json"), 60);
        tokens.init();
        WorkerEnvironment env = new WorkerEnvironment("python3", tmp.getRoot().toPath(), tmp.getRoot().getPath(), null,
                true, false, "", true, "");
        models = new ModelManager(cfg, env, tmp.getRoot().toPath());
        server = new HttpServer(new org.tserve.server.ServerContext(cfg, models, tokens), List.of());
        server.start();
    }

    @After
    public void stop() {
        if (server != null) {
            server.shutdown();
        }
        if (models != null) {
            models.shutdown();
        }
    }

    private HttpResponse<String> call(String method, int port, String path, String body, String... headers) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
                .method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
        for (int i = 0; i < headers.length; i += 2) {
            b.header(headers[i], headers[i + 1]);
        }
        return client.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    private static JsonObject json(HttpResponse<String> r) {
        return JsonParser.parseString(r.body()).getAsJsonObject();
    }

    private static void assertError(HttpResponse<String> r, int code, String type, String messagePart) {
        assertEquals(r.body(), code, r.statusCode());
        JsonObject o = json(r);
        assertEquals(code, o.get("code").getAsInt());
        assertEquals(type, o.get("type").getAsString());
        assertTrue(o.get("message").getAsString(), o.get("message").getAsString().contains(messagePart));
        assertEquals("keep-alive", r.headers().firstValue("connection").orElse(""));
    }

    @Test
    public void pingAndErrorsHaveTorchServesShape() throws Exception {
        start("", false);
        HttpResponse<String> r = call("GET", inf, "/ping", null);
        assertEquals(200, r.statusCode());
        assertEquals("Healthy", json(r).get("status").getAsString());
        assertError(call("POST", inf, "/predictions/nope", "x"), 404, "ModelNotFoundException", "Model not found: nope");
        assertError(call("POST", inf, "/nothing/here", "x"), 404, "ResourceNotFoundException", "not found");
        assertError(call("GET", mgmt, "/models/nope", null), 404, "ModelNotFoundException", "nope");
        assertError(call("DELETE", mgmt, "/models/nope", null), 405, "MethodNotAllowedException", "Requested method is not allowed, please refer to API document.");  // TorchServe's body
        assertError(call("POST", mgmt, "/models?url=x.mar", null), 405, "MethodNotAllowedException", "Requested method is not allowed, please refer to API document.");
        assertError(call("PUT", mgmt, "/models/nope?min_worker=x", null), 400, "BadRequestException", "min_worker");
        assertError(call("PUT", mgmt, "/models/nope?min_worker=2&max_worker=1", null), 400, "BadRequestException", "max_worker");
        // a model called "tokenizer" is a model, not the token API
        assertError(call("GET", mgmt, "/models/tokenizer", null), 404, "ModelNotFoundException", "tokenizer");
        HttpResponse<String> list = call("GET", mgmt, "/models", null);
        assertEquals(200, list.statusCode());
        assertEquals(0, json(list).getAsJsonArray("models").size());
    }

    /** Each operation the management document names is routed (never the generic 404); other methods are 405. */
    @Test
    public void everyDocumentedManagementOperationIsRouted() throws Exception {
        // model API on (off, register and unregister answer TorchServe's generic 405 body): no
        // model exists and no call below names an archive, so none changes anything
        start("enable_model_api=true\n", false);
        JsonObject paths = json(call("OPTIONS", mgmt, "/", null)).getAsJsonObject("paths");
        for (String path : paths.keySet()) {
            String concrete = path.replaceAll("\\{[^}]+}", "nope");
            for (String method : paths.getAsJsonObject(path).keySet()) {
                HttpResponse<String> r = call(method.toUpperCase(java.util.Locale.ROOT), mgmt, concrete, null);
                assertTrue(method + " " + path + ": " + r.body(), !r.body().contains("refer to API document"));
            }
            if (!path.equals("/") && !path.equals("/api-description") && !path.equals("/token")) {
                assertError(call("PATCH", mgmt, concrete, null), 405, "MethodNotAllowedException", "refer to API document");
            }
        }
    }

    @Test
    public void oversizedRequestGets413WithJson() throws Exception {
        start("", false);
        HttpResponse<String> r = call("POST", inf, "/predictions/m", "x".repeat(5000));
        assertEquals(413, r.statusCode());
        assertEquals("RequestEntityTooLargeException", json(r).get("type").getAsString());
        assertTrue(json(r).get("message").getAsString().contains("max_request_size"));
    }

    @Test
    public void apiDescriptionIsOpenApi3PerConnector() throws Exception {
        start("", false);
        HttpResponse<String> r = call("OPTIONS", inf, "/", null);
        assertEquals(200, r.statusCode());
        JsonObject d = json(r);
        assertTrue(d.get("openapi").getAsString().startsWith("3."));
        assertTrue(d.getAsJsonObject("paths").has("/predictions/{model_name}"));
        JsonObject m = json(call("GET", mgmt, "/api-description", null));
        assertTrue(m.getAsJsonObject("paths").has("/models"));
        assertTrue(!m.getAsJsonObject("paths").has("/ping"));
    }

    @Test
    public void registerWithoutUrlIs400() throws Exception {
        start("enable_model_api=true\n", false);
        assertError(call("POST", mgmt, "/models", null), 400, "BadRequestException", "url");
        assertError(call("POST", mgmt, "/models?url=missing.mar", null), 404, "ModelNotFoundException", "missing.mar");
    }

    @Test
    public void tokensAreCheckedPerApiWith401() throws Exception {
        start("", true);
        JsonObject keys = JsonParser.parseString(new String(Files.readAllBytes(tokens.getFile()), StandardCharsets.UTF_8))
                .getAsJsonObject();
        String infKey = keys.getAsJsonObject("inference").get("key").getAsString();
        String mgmtKey = keys.getAsJsonObject("management").get("key").getAsString();
        String apiKey = keys.getAsJsonObject("API").get("key").getAsString();
        assertEquals("rw-------", java.nio.file.attribute.PosixFilePermissions.toString(
                Files.getPosixFilePermissions(tokens.getFile())));
        assertError(call("GET", inf, "/ping", null), 401, "InvalidKeyException", "'inference' key");
        assertError(call("GET", inf, "/ping", null, "Authorization", "Bearer " + mgmtKey), 401, "InvalidKeyException", "inference");
        assertEquals(200, call("GET", inf, "/ping", null, "Authorization", "Bearer " + infKey).statusCode());
        assertError(call("GET", mgmt, "/models", null), 401, "InvalidKeyException", "'management' key");
        assertEquals(200, call("GET", mgmt, "/models", null, "Authorization", "Bearer " + mgmtKey).statusCode());
        // the description needs no token
        assertEquals(200, call("OPTIONS", inf, "/", null).statusCode());
        // rotation needs the API key and changes the management key
        assertError(call("POST", mgmt, "/token?type=management", null, "Authorization", "Bearer " + mgmtKey), 401,
                "InvalidKeyException", "'API' key");
        assertEquals(200, call("POST", mgmt, "/token?type=management", null, "Authorization", "Bearer " + apiKey).statusCode());
        assertEquals(401, call("GET", mgmt, "/models", null, "Authorization", "Bearer " + mgmtKey).statusCode());
        String rotated = JsonParser.parseString(new String(Files.readAllBytes(tokens.getFile()), StandardCharsets.UTF_8))
                .getAsJsonObject().getAsJsonObject("management").get("key").getAsString();
        assertEquals(200, call("GET", mgmt, "/models", null, "Authorization", "Bearer " + rotated).statusCode());
        assertError(call("POST", mgmt, "/token?type=bogus", null, "Authorization", "Bearer " + apiKey), 400,
                "BadRequestException", "management or inference");
    }

    /** OpenAI's error shape {"error": {"message", "type", "param", "code"}}, the connection kept. */
    private static JsonObject assertOpenAiError(HttpResponse<String> r, int status, String type, String param, String code,
                                                String messagePart) {
        assertEquals(r.body(), status, r.statusCode());
        assertEquals("application/json", r.headers().firstValue("content-type").orElse(""));
        JsonObject e = json(r).getAsJsonObject("error");
        assertEquals(r.body(), type, e.get("type").getAsString());
        assertEquals(r.body(), param == null, e.get("param").isJsonNull());
        if (param != null) {
            assertEquals(param, e.get("param").getAsString());
        }
        assertEquals(r.body(), code == null, e.get("code").isJsonNull());
        if (code != null) {
            assertEquals(code, e.get("code").getAsString());
        }
        assertTrue(e.get("message").getAsString(), e.get("message").getAsString().contains(messagePart));
        assertEquals("keep-alive", r.headers().firstValue("connection").orElse(""));
        return e;
    }

    @Test
    public void oipGenerateRoutesAnswerTheirErrorsAsErrorFields() throws Exception {
        start("", true);
        String key = "Bearer " + JsonParser.parseString(new String(Files.readAllBytes(tokens.getFile()),
                StandardCharsets.UTF_8)).getAsJsonObject().getAsJsonObject("inference").get("key").getAsString();
        for (String path : new String[] {"/v2/models/nope/generate", "/v2/models/nope/versions/2.0/generate_stream"}) {
            HttpResponse<String> r = call("POST", inf, path, "{\"text_input\": \"hi\"}", "Authorization", key);
            assertEquals(r.body(), 404, r.statusCode());
            assertTrue(r.body(), json(r).get("error").getAsString().contains("nope"));
            r = call("GET", inf, path, null, "Authorization", key);
            assertEquals(r.body(), 405, r.statusCode());
            assertTrue(r.body(), json(r).get("error").getAsString().contains("POST"));
            r = call("POST", inf, path, "{}");
            assertEquals(r.body(), 401, r.statusCode());
            assertTrue(r.body(), json(r).has("error"));
        }
        // every /v2 route answers the protocol's {"error": "..."} (tritonclient and KServe's client read it)
        HttpResponse<String> r = call("GET", inf, "/v2/models/nope", null, "Authorization", key);
        assertEquals(r.body(), 404, r.statusCode());
        assertEquals(r.body(), java.util.Set.of("error"), json(r).keySet());
        assertTrue(r.body(), json(r).get("error").getAsString().contains("nope"));
    }

    @Test
    public void openAiRoutesCheckTheBodyAndAnswerOpenAiErrors() throws Exception {
        start("", false);
        String ct = "Content-Type";
        String js = "application/json";
        for (String path : new String[] {"/v1/completions", "/v1/chat/completions"}) {
            assertOpenAiError(call("POST", inf, path, "{not json", ct, js), 400, "invalid_request_error", null, null, "JSON");
            assertOpenAiError(call("POST", inf, path, "", ct, js), 400, "invalid_request_error", null, null, "JSON");
            assertOpenAiError(call("POST", inf, path, "[1, 2]", ct, js), 400, "invalid_request_error", null, null, "object");
            assertOpenAiError(call("POST", inf, path, "{\"a\": 1} {}", ct, js), 400, "invalid_request_error", null, null,
                    "JSON");
            assertOpenAiError(call("POST", inf, path, "{\"prompt\": \"hi\"}", ct, js), 400, "invalid_request_error",
                    "model", null, "model");
            assertOpenAiError(call("POST", inf, path, "{\"model\": 3}", ct, js), 400, "invalid_request_error", "model",
                    null, "string");
            assertOpenAiError(call("POST", inf, path, "{\"model\": \"nope\", \"x\": [[{}]]}", ct, js), 404,
                    "invalid_request_error", "model", "model_not_found", "`nope`");
            assertOpenAiError(call("GET", inf, path, null), 405, "invalid_request_error", null, "method_not_allowed", "POST");
        }
        // deep nesting is skipped, not parsed recursively
        String deep = "{\"x\": " + "[".repeat(400) + "]".repeat(400) + ", \"model\": \"deep\"}";
        assertOpenAiError(call("POST", inf, "/v1/completions", deep, ct, js), 404, "invalid_request_error", "model",
                "model_not_found", "`deep`");
        // TorchServe's forms: the path names the model (the body's is ignored), with or without a version
        assertOpenAiError(call("POST", inf, "/predictions/nope/v1/completions", "{\"model\": \"other\"}", ct, js), 404,
                "invalid_request_error", "model", "model_not_found", "`nope`");
        assertOpenAiError(call("POST", inf, "/predictions/nope/2.0/v1/chat/completions", "{}", ct, js), 404,
                "invalid_request_error", "model", "model_not_found", "nope");
        assertOpenAiError(call("POST", inf, "/predictions/nope/v1/completions", "[]", ct, js), 400,
                "invalid_request_error", null, null, "object");
        assertOpenAiError(call("GET", inf, "/predictions/nope/v1/models", null), 404, "invalid_request_error", "model",
                "model_not_found", "nope");
        assertOpenAiError(call("POST", inf, "/v1/models", "{}"), 405, "invalid_request_error", null, "method_not_allowed",
                "GET");
        HttpResponse<String> list = call("GET", inf, "/v1/models", null);
        assertEquals(200, list.statusCode());
        assertEquals("list", json(list).get("object").getAsString());
        assertEquals(0, json(list).getAsJsonArray("data").size());
        // the other routes keep TorchServe's shape; the management port has no OpenAI routes
        assertError(call("POST", inf, "/v1/models/nope:predict", "x"), 404, "ModelNotFoundException", "nope");
        assertError(call("POST", inf, "/predictions/nope/v1", "{}"), 404, "ModelNotFoundException", "nope");
        assertOpenAiError(call("POST", inf, "/v1/other", "{}"), 404, "invalid_request_error", null, null,
                "Invalid URL (POST /v1/other)");
        assertError(call("POST", mgmt, "/v1/completions", "{\"model\": \"m\"}"), 404, "ResourceNotFoundException",
                "not found");
    }

    @Test
    public void openAiRoutesNeedTheInferenceKeyAndAreDescribed() throws Exception {
        start("", true);
        String infKey = JsonParser.parseString(new String(Files.readAllBytes(tokens.getFile()), StandardCharsets.UTF_8))
                .getAsJsonObject().getAsJsonObject("inference").get("key").getAsString();
        assertOpenAiError(call("GET", inf, "/v1/models", null), 401, "invalid_request_error", null, "invalid_api_key",
                "'inference' key");
        assertOpenAiError(call("POST", inf, "/v1/chat/completions", "{}", "Authorization", "Bearer wrong"), 401,
                "invalid_request_error", null, "invalid_api_key", "inference");
        assertEquals(200, call("GET", inf, "/v1/models", null, "Authorization", "Bearer " + infKey).statusCode());
        JsonObject paths = json(call("OPTIONS", inf, "/", null)).getAsJsonObject("paths");
        for (String p : new String[] {"/v1/completions", "/v1/chat/completions", "/v1/models",
            "/predictions/{model_name}/v1/completions", "/predictions/{model_name}/{model_version}/v1/chat/completions",
            "/predictions/{model_name}/{model_version}/v1/models"}) {
            assertTrue(p, paths.has(p));
        }
        assertTrue(paths.getAsJsonObject("/v1/completions").has("post"));
        assertTrue(paths.getAsJsonObject("/v1/models").has("get"));
    }
}

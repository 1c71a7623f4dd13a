package org.tserve.http;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.Test;

/**
 * The OpenAPI descriptions are complete and consistent: what the schemathesis run
 * (test/integration/test_fuzz_rest.py) relies on to fuzz every route.
 */
public class ApiDescriptionTest {
    private static final Pattern TEMPLATE = Pattern.compile("\\{([^}]+)}");

    /** Path templates match their declared path parameters; ids are unique; every $ref resolves. */
    private static void assertConsistent(JsonObject doc) {
        Set<String> ids = new HashSet<>();
        JsonObject schemas = doc.getAsJsonObject("components").getAsJsonObject("schemas");
        for (Map.Entry<String, JsonElement> path : doc.getAsJsonObject("paths").entrySet()) {
            Set<String> inTemplate = new TreeSet<>();
            Matcher m = TEMPLATE.matcher(path.getKey());
            while (m.find()) {
                inTemplate.add(m.group(1));
            }
            for (Map.Entry<String, JsonElement> method : path.getValue().getAsJsonObject().entrySet()) {
                String where = method.getKey() + " " + path.getKey();
                JsonObject op = method.getValue().getAsJsonObject();
                assertTrue("duplicate operationId at " + where, ids.add(op.get("operationId").getAsString()));
                Set<String> declared = new TreeSet<>();
                for (JsonElement p : op.getAsJsonArray("parameters")) {
                    if (p.getAsJsonObject().get("in").getAsString().equals("path")) {
                        declared.add(p.getAsJsonObject().get("name").getAsString());
                    }
                }
                assertEquals(where, inTemplate, declared);
                assertTrue("no responses at " + where, op.getAsJsonObject("responses").size() > 0);
                assertRefsResolve(op, schemas, where);
            }
        }
    }

    private static void assertRefsResolve(JsonElement e, JsonObject schemas, String where) {
        if (e.isJsonObject()) {
            for (Map.Entry<String, JsonElement> x : e.getAsJsonObject().entrySet()) {
                if (x.getKey().equals("$ref")) {
                    String name = x.getValue().getAsString().replace("#/components/schemas/", "");
                    assertTrue(where + ": " + name, schemas.has(name));
                } else {
                    assertRefsResolve(x.getValue(), schemas, where);
                }
            }
        } else if (e.isJsonArray()) {
            e.getAsJsonArray().forEach(x -> assertRefsResolve(x, schemas, where));
        }
    }

    private static Set<String> routes(JsonObject doc) {
        Set<String> out = new TreeSet<>();
        doc.getAsJsonObject("paths").entrySet().forEach(p -> p.getValue().getAsJsonObject().keySet()
                .forEach(method -> out.add(method.toUpperCase(java.util.Locale.ROOT) + " " + p.getKey())));
        return out;
    }

    @Test
    public void everyConnectorDocumentIsConsistent() {
        ApiDescription d = new ApiDescription(true, true);
        for (ConnectorType t : ConnectorType.values()) {
            assertConsistent(d.forConnector(t));
        }
    }

    @Test
    public void everyRouteFamilyIsDescribed() {
        Set<String> inference = routes(new ApiDescription(false, false).inference());
        for (String r : new String[] {"GET /ping", "POST /predictions/{model_name}/{model_version}",
            "POST /explanations/{model_name}", "POST /v1/models/{model_name}:predict", "GET /v2/health/ready",
            "GET /v2/models/{model_name}/versions/{model_version}/ready", "POST /v2/models/{model_name}/infer",
            "POST /invocations", "POST /models/{model_name}/invoke", "POST /{model_name}/{model_version}/predict",
            "POST /v1/chat/completions", "GET /predictions/{model_name}/v1/models", "OPTIONS /"}) {
            assertTrue(r, inference.contains(r));
        }
        Set<String> management = routes(new ApiDescription(false, false).management());
        for (String r : new String[] {"GET /models", "POST /models", "PUT /models/{model_name}",
            "DELETE /models/{model_name}/{model_version}", "PUT /models/{model_name}/{model_version}/set-default",
            "GET /v1/models/{model_name}", "POST /token", "GET /api-description"}) {
            assertTrue(r, management.contains(r));
        }
        assertFalse(management.contains("GET /cluster/workers"));
        assertTrue(routes(new ApiDescription(false, true).management()).contains("DELETE /cluster/workers/{job_id}"));
        assertTrue(routes(new ApiDescription(false, false).metrics()).contains("GET /metrics"));
        // one port for both APIs: the paths both have keep every method
        Set<String> both = routes(new ApiDescription(false, false).forConnector(ConnectorType.INFERENCE_AND_MANAGEMENT));
        assertTrue(both.containsAll(inference));
        assertTrue(both.containsAll(management));
    }

    @Test
    public void tokenAuthorizationIsDeclaredExceptOnTheDescriptions() {
        JsonObject on = new ApiDescription(true, false).inference();
        assertTrue(on.has("security"));
        assertEquals("bearer", on.getAsJsonObject("components").getAsJsonObject("securitySchemes")
                .getAsJsonObject("bearerAuth").get("scheme").getAsString());
        assertEquals(0, on.getAsJsonObject("paths").getAsJsonObject("/").getAsJsonObject("options")
                .getAsJsonArray("security").size());
        assertFalse(new ApiDescription(false, false).inference().has("security"));
        assertFalse(new ApiDescription(true, false).metrics().has("security"));
    }

    @Test
    public void documentedErrorsUseTheirShapes() {
        JsonObject paths = new ApiDescription(false, false).inference().getAsJsonObject("paths");
        JsonObject openAi = paths.getAsJsonObject("/v1/completions").getAsJsonObject("post").getAsJsonObject("responses");
        assertEquals("#/components/schemas/OpenAiError", openAi.getAsJsonObject("404").getAsJsonObject("content")
                .getAsJsonObject("application/json").getAsJsonObject("schema").get("$ref").getAsString());
        // the size limit answers before routing, in TorchServe's shape
        assertEquals("#/components/schemas/ErrorResponse", openAi.getAsJsonObject("413").getAsJsonObject("content")
                .getAsJsonObject("application/json").getAsJsonObject("schema").get("$ref").getAsString());
        JsonObject predict = paths.getAsJsonObject("/predictions/{model_name}").getAsJsonObject("post");
        for (String code : new String[] {"400", "404", "413", "500", "503", "504", "507"}) {
            assertTrue(code, predict.getAsJsonObject("responses").has(code));
        }
        assertTrue(predict.getAsJsonObject("requestBody").getAsJsonObject("content").has("multipart/form-data"));
    }
}

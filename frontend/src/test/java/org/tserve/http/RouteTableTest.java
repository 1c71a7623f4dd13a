package org.tserve.http;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertTrue;

import com.google.gson.JsonObject;
import io.netty.handler.codec.http.HttpMethod;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.TreeSet;
import org.junit.Test;

/** The route table: dispatch finds every route, and the OpenAPI document is exactly the table. */
public class RouteTableTest {
    private static Set<String> documented(JsonObject doc) {
        Set<String> out = new TreeSet<>();
        doc.getAsJsonObject("paths").entrySet().forEach(p -> p.getValue().getAsJsonObject().keySet()
                .forEach(m -> out.add(m.toUpperCase(Locale.ROOT) + " " + p.getKey())));
        return out;
    }

    /** A request path that fits the route's pattern, each {@code {name}} filled in. */
    private static String[] sample(Route r) {
        String[] seg = r.segments.clone();
        for (int i = 0; i < seg.length; i++) {
            seg[i] = Route.isParam(seg[i]) ? "x" + i + seg[i].substring(seg[i].indexOf('}') + 1) : seg[i];   // {m}:verb
        }
        return seg;
    }

    @Test
    public void theDocumentHasEveryRouteAndNothingElse() {
        for (boolean member : new boolean[] {false, true}) {
            Set<String> routed = new TreeSet<>(Set.of("OPTIONS /", "GET /api-description"));   // answered before routing
            RouteTable.of(Route.Api.MANAGEMENT, member).forEach(r -> routed.add(r.method.name() + " " + r.path));
            assertEquals(routed, documented(new ApiDescription(false, member).management()));
        }
    }

    @Test
    public void theInferenceAndSharedDocumentsHaveEveryRouteAndNothingElse() {
        for (boolean member : new boolean[] {false, true}) {
            Set<String> inference = new TreeSet<>(Set.of("OPTIONS /", "GET /api-description"));
            RouteTable.of(Route.Api.INFERENCE, member).forEach(r -> inference.add(r.method.name() + " " + r.path));
            ApiDescription d = new ApiDescription(true, member);
            assertEquals(inference, documented(d.inference()));
            assertEquals(inference, documented(d.forConnector(ConnectorType.INFERENCE)));
            Set<String> shared = new TreeSet<>(inference);
            RouteTable.of(Route.Api.MANAGEMENT, member).forEach(r -> shared.add(r.method.name() + " " + r.path));
            assertEquals(shared, documented(d.forConnector(ConnectorType.INFERENCE_AND_MANAGEMENT)));
        }
    }

    /** A model setting declared with {@code api(...)} in ModelKeys is a register parameter without any other line. */
    @Test
    public void theRegisterParametersAreTheDeclaredModelKeys() {
        JsonObject op = new ApiDescription(false, false).management().getAsJsonObject("paths")
                .getAsJsonObject("/models").getAsJsonObject("post");
        Set<String> params = new TreeSet<>();
        op.getAsJsonArray("parameters").forEach(p -> params.add(p.getAsJsonObject().get("name").getAsString()));
        Set<String> body = op.getAsJsonObject("requestBody").getAsJsonObject("content").getAsJsonObject("application/json")
                .getAsJsonObject("schema").getAsJsonObject("properties").keySet();
        assertFalse(org.tserve.config.ModelKeys.apiKeys().isEmpty());
        for (org.tserve.config.ModelKey<?> k : org.tserve.config.ModelKeys.apiKeys()) {
            assertTrue(k.apiParam(), params.contains(k.apiParam()));
            assertTrue(k.apiParam(), body.contains(k.apiParam()));
        }
        assertTrue(params.containsAll(Set.of("url", "model_name", "handler", "runtime", "synchronous")));
    }

    @Test
    public void everyRouteIsReachedByItsOwnPathAndMethod() {
        for (Route.Api api : Route.Api.values()) {
            List<Route> all = RouteTable.of(api, true);
            for (Route r : all) {
                assertNotNull(r.path, r.handler);
                RouteTable.Match m = RouteTable.match(all, sample(r), r.method);
                assertSame(r.method + " " + r.path + " is shadowed", r, m.route());
            }
        }
    }

    @Test
    public void anotherMethodOnARoutedPathIs405() {
        List<Route> all = RouteTable.of(Route.Api.MANAGEMENT, true);
        for (Route r : all) {
            RouteTable.Match m = RouteTable.match(all, sample(r), HttpMethod.PATCH);
            assertTrue(r.path, m.pathKnown());
            // TorchServe's /token answers every method
            assertEquals(r.path, r.anyMethod ? r : null, m.route());
        }
    }

    @Test
    public void inferenceRoutesAnswerEveryMethodOrFallThrough() {
        List<Route> all = RouteTable.of(Route.Api.INFERENCE, false);
        for (Route r : all) {
            RouteTable.Match m = RouteTable.match(all, sample(r), HttpMethod.PATCH);
            assertTrue(r.path, m.claimed());
            // no inference path answers 405 from the table: a route's handler does, or another method is 404
            assertEquals(r.path, m.route() != null, m.pathKnown());
        }
    }

    private static String found(String method, String path) {
        Route r = RouteTable.match(RouteTable.of(Route.Api.INFERENCE, false), RequestHandler.segments(path),
                HttpMethod.valueOf(method)).route();
        return r == null ? null : r.operationId;
    }

    @Test
    public void inferencePatterns() {
        // {model}:verb; GET on any /v1/models/{x} is the readiness probe (TorchServe ignores a :suffix)
        assertEquals("kservePredict", found("POST", "/v1/models/m:predict"));
        assertEquals("kserveExplain", found("POST", "/v1/models/m:explain"));
        assertEquals("kserveModelReady", found("GET", "/v1/models/m:predict"));
        assertNull(found("POST", "/v1/models/m"));
        assertEquals("m", RouteTable.pathParams(RouteTable.of(Route.Api.INFERENCE, false).stream()
                .filter(r -> r.operationId.equals("kservePredict")).findFirst().orElseThrow(),
                RequestHandler.segments("/v1/models/m:predict")).get(Route.MODEL));
        // a tail after the version; the OpenAI forms come first
        assertEquals("versionPredictions", found("PUT", "/predictions/m/1/a/b"));
        assertEquals("openaiModelCompletions", found("POST", "/predictions/m/v1/completions"));
        assertEquals("openaiModelVersionModels", found("GET", "/predictions/m/v1/v1/models"));
        assertEquals("modelApiDescription", found("OPTIONS", "/predictions/m"));
        // the legacy catch-all never takes the API's own names
        assertEquals("legacyPredict", found("POST", "/m/predict"));
        assertEquals("legacyVersionPredict", found("GET", "/m/1/predict"));
        for (String reserved : new String[] {"ping", "v2", "models", "token", "api-description",
            "metrics", "invocations"}) {   // (/workflows/predict is a management path, /wfpredict/predict a workflow)
            assertNull(reserved, found("POST", "/" + reserved + "/predict"));
        }
        assertTrue(RouteTable.inferenceOnly(new String[] {"v2", "unknown"}));
        assertFalse(RouteTable.inferenceOnly(new String[] {"models", "m"}));
    }

    @Test
    public void unroutedPathsAreNotFound() {
        List<Route> plain = RouteTable.of(Route.Api.MANAGEMENT, false);
        assertFalse(RouteTable.match(plain, new String[] {"models", "m", "1", "other"}, HttpMethod.PUT).pathKnown());
        assertFalse(RouteTable.match(plain, new String[] {"cluster", "workers"}, HttpMethod.GET).pathKnown());
        assertFalse(RouteTable.match(plain, new String[] {"token", "x"}, HttpMethod.POST).pathKnown());
        assertNull(RouteTable.match(plain, new String[] {"models"}, HttpMethod.PUT).route());
    }
}

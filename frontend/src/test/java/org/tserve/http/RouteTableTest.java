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
            seg[i] = Route.isParam(seg[i]) ? "x" + i : seg[i];
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
    public void everyRouteIsReachedByItsOwnPathAndMethod() {
        List<Route> all = RouteTable.of(Route.Api.MANAGEMENT, true);
        for (Route r : all) {
            assertNotNull(r.path, r.handler);
            RouteTable.Match m = RouteTable.match(all, sample(r), r.method);
            assertSame(r.method + " " + r.path + " is shadowed", r, m.route());
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
    public void unroutedPathsAreNotFound() {
        List<Route> plain = RouteTable.of(Route.Api.MANAGEMENT, false);
        assertFalse(RouteTable.match(plain, new String[] {"models", "m", "1", "other"}, HttpMethod.PUT).pathKnown());
        assertFalse(RouteTable.match(plain, new String[] {"cluster", "workers"}, HttpMethod.GET).pathKnown());
        assertFalse(RouteTable.match(plain, new String[] {"token", "x"}, HttpMethod.POST).pathKnown());
        assertNull(RouteTable.match(plain, new String[] {"models"}, HttpMethod.PUT).route());
    }
}

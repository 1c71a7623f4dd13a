package org.tserve.http;

import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.QueryStringDecoder;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The REST routes, each declared once ({@link Route}): dispatch and the OpenAPI document
 * ({@link ApiDescription}) both read this table: the inference API ({@link InferenceRoutes}) and
 * the management API ({@link ManagementRoutes}, {@link WorkflowRoutes}, {@link ClusterRoutes}).
 */
final class RouteTable {
    /** The objects whose methods the routes' handlers call. */
    record Apis(InferenceApi inference, ManagementApi management, WorkflowApi workflows) {
    }

    /** Every route, in the document's order. */
    static final List<Route> ROUTES;
    /** The named schemas each API's answers refer to, name to JSON text. */
    private static final Map<Route.Api, Map<String, String>> SCHEMAS = Map.of(Route.Api.INFERENCE,
            InferenceRoutes.schemas(), Route.Api.MANAGEMENT, ManagementRoutes.schemas());
    /** First path segments only inference routes start with: the inference key is checked before their 404. */
    private static final Set<String> INFERENCE_ONLY = new HashSet<>();
    /**
     * First path segments that are never the leading {@code {name}} of a {@link Route#fallback} route:
     * every route's, and those answered before the table (the description, the metrics connector's).
     */
    private static final Set<String> RESERVED = new HashSet<>(Set.of("api-description", "metrics"));

    static {
        List<Route> all = new ArrayList<>(InferenceRoutes.routes());
        all.addAll(ManagementRoutes.routes());
        ROUTES = List.copyOf(all);
        Set<String> management = new HashSet<>();
        for (Route r : ROUTES) {
            String first = r.segments.length > 0 && !Route.isParam(r.segments[0]) ? r.segments[0] : null;
            if (first != null && !r.memberOnly) {
                RESERVED.add(first);
                (r.api == Route.Api.INFERENCE ? INFERENCE_ONLY : management).add(first);
            }
        }
        INFERENCE_ONLY.removeAll(management);
    }

    /** What each path parameter names, for the document. */
    private static final Map<String, String> PATH_PARAMS = Map.of(Route.MODEL, "Name of the model.",
            Route.VERSION, "Version of the model.", "workflow_name", "Name of the workflow.",
            "job_id", "The job's id.");

    private RouteTable() {
    }

    /** The routes of an API on this server (the /cluster routes only on a cluster member). */
    static List<Route> of(Route.Api api, boolean clusterMember) {
        List<Route> out = new ArrayList<>();
        for (Route r : ROUTES) {
            if (r.api == api && (clusterMember || !r.memberOnly)) {
                out.add(r);
            }
        }
        return out;
    }

    /**
     * What a request's path and method find: a route, a path without that method (405), or nothing
     * (404). {@code claimed}: the API owns the path whatever the method (its key is checked before a
     * 404 or 405).
     */
    record Match(Route route, boolean pathKnown, boolean readsParams, boolean claimed) {
        static final Match NONE = new Match(null, false, false, false);
    }

    /**
     * The route for a path and method: the exact routes first, then the {@link Route#lowPriority}
     * ones; among the routes of a path the one of that method, else an {@link Route#anyMethod} one.
     */
    static Match match(List<Route> routes, String[] seg, HttpMethod method) {
        Match m = match(routes, seg, method, false);
        return m.claimed() ? m : match(routes, seg, method, true);
    }

    private static Match match(List<Route> routes, String[] seg, HttpMethod method, boolean lowPriority) {
        Route exact = null;
        Route any = null;
        boolean pathKnown = false;
        boolean claimed = false;
        boolean readsParams = false;
        for (Route r : routes) {
            if (r.lowPriority() != lowPriority || !r.matchesPath(seg)
                    || r.fallback && RESERVED.contains(seg[0])) {
                continue;
            }
            claimed = true;
            boolean same = r.method.equals(method);
            pathKnown |= !r.otherMethodsNotHere || same || r.anyMethod;
            readsParams |= r.readsParams;
            if (exact == null && same) {
                exact = r;
            }
            if (any == null && r.anyMethod) {
                any = r;
            }
        }
        if (!claimed) {
            return Match.NONE;
        }
        return new Match(exact != null ? exact : any, pathKnown, readsParams, true);
    }

    /** The path starts with a segment only inference routes start with ({@code /v2/...}, {@code /predictions/...}). */
    static boolean inferenceOnly(String[] seg) {
        return seg.length > 0 && INFERENCE_ONLY.contains(seg[0]);
    }

    /**
     * Answers the request when the path is one of {@code routes}: its handler, or 405 when it has
     * no such method. False when no route has the path.
     */
    static boolean dispatch(Match m, Apis apis, Exchange ex, FullHttpRequest req, String[] seg,
                            QueryStringDecoder q) throws HttpError {
        if (!m.pathKnown()) {
            return false;
        }
        Route r = m.route();
        Map<String, String> path = r != null ? pathParams(r, seg) : Map.of();
        String tail = r != null ? String.join("/", java.util.Arrays.copyOfRange(seg, r.segments.length, seg.length)) : "";
        RouteCall c = new RouteCall(apis, ex, req, q, path, tail);
        if (m.readsParams()) {
            c.params();   // as TorchServe: a malformed JSON body is a 400 before the method is checked
        }
        if (r == null) {
            throw HttpError.methodNotAllowed();
        }
        r.handler.handle(c);
        return true;
    }

    /** The values a path's segments give the route's {@code {name}} parameters. */
    static Map<String, String> pathParams(Route r, String[] seg) {
        Map<String, String> path = new HashMap<>();
        for (int i = 0; i < r.segments.length; i++) {
            String name = Route.paramName(r.segments[i]);
            if (name != null) {
                path.put(name, Route.value(r.segments[i], seg[i]));
            }
        }
        return path;
    }

    /** Adds the routes' operations, and the schemas their API's answers refer to, to a document. */
    static void document(OpenApiBuilder d, Route.Api api, List<Route> routes) {
        SCHEMAS.getOrDefault(api, new LinkedHashMap<>()).forEach(d::schema);
        for (Route r : routes) {
            OpenApiBuilder.Op op = d.op(r.method.name().toLowerCase(java.util.Locale.ROOT), r.path, r.operationId,
                    r.description);
            for (String s : r.segments) {
                String name = Route.paramName(s);
                if (name != null) {
                    op.path(name, PATH_PARAMS.get(name));
                }
            }
            r.doc.describe(op);
        }
    }
}

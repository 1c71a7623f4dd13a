package org.tserve.http;

import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.QueryStringDecoder;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The REST routes, each declared once ({@link Route}): dispatch and the OpenAPI document
 * ({@link ApiDescription}) both read this table. So far it holds the management API
 * ({@link ManagementRoutes}); the inference routes are still recognised in {@link InferenceApi}.
 */
final class RouteTable {
    /** The objects whose methods the routes' handlers call. */
    record Apis(ManagementApi management, WorkflowApi workflows) {
    }

    /** Every route, in the document's order. */
    static final List<Route> ROUTES = List.copyOf(ManagementRoutes.routes());
    /** The named schemas the routes' answers refer to, name to JSON text. */
    static final Map<String, String> SCHEMAS = ManagementRoutes.schemas();

    /** What each path parameter names, for the document. */
    private static final Map<String, String> PATH_PARAMS = Map.of(InferenceApiDescription.MODEL, "Name of the model.",
            InferenceApiDescription.VERSION, "Version of the model.", "workflow_name", "Name of the workflow.",
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

    /** What a request's path and method find: a route, a path without that method (405), or nothing (404). */
    record Match(Route route, boolean pathKnown, boolean readsParams) {
        static final Match NONE = new Match(null, false, false);
    }

    static Match match(List<Route> routes, String[] seg, HttpMethod method) {
        Route found = null;
        boolean pathKnown = false;
        boolean readsParams = false;
        for (Route r : routes) {
            if (r.matchesPath(seg)) {
                pathKnown = true;
                readsParams |= r.readsParams;
                if (found == null && (r.anyMethod || r.method.equals(method))) {
                    found = r;
                }
            }
        }
        return pathKnown ? new Match(found, true, readsParams) : Match.NONE;
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
        Map<String, String> path = new HashMap<>();
        if (r != null) {
            for (int i = 0; i < seg.length; i++) {
                if (Route.isParam(r.segments[i])) {
                    path.put(r.segments[i].substring(1, r.segments[i].length() - 1), seg[i]);
                }
            }
        }
        RouteCall c = new RouteCall(apis, ex, req, q, path);
        if (m.readsParams()) {
            c.params();   // as TorchServe: a malformed JSON body is a 400 before the method is checked
        }
        if (r == null) {
            throw HttpError.methodNotAllowed();
        }
        r.handler.handle(c);
        return true;
    }

    /** Adds the routes' operations, and the schemas they refer to, to a document. */
    static void document(OpenApiBuilder d, List<Route> routes) {
        SCHEMAS.forEach(d::schema);
        for (Route r : routes) {
            OpenApiBuilder.Op op = d.op(r.method.name().toLowerCase(java.util.Locale.ROOT), r.path, r.operationId,
                    r.description);
            for (String s : r.segments) {
                if (Route.isParam(s)) {
                    String name = s.substring(1, s.length() - 1);
                    op.path(name, PATH_PARAMS.get(name));
                }
            }
            r.doc.describe(op);
        }
    }
}

package org.tserve.http;

import io.netty.handler.codec.http.HttpMethod;
import org.tserve.auth.TokenAuthorization.KeyType;

/**
 * One REST route of {@link RouteTable}: what dispatch needs (method, path pattern, connector,
 * key, handler) and what the OpenAPI document says of it, declared together so they cannot drift.
 */
final class Route {
    /** Which connector's API the route belongs to (the shared connector serves both). */
    enum Api { INFERENCE, MANAGEMENT }

    /** The token a route needs. */
    enum Auth {
        MANAGEMENT(KeyType.MANAGEMENT),
        /** The API key (token rotation). */
        API(KeyType.API),
        /** The management key or the cluster_key a leader shares with its members. */
        CLUSTER(KeyType.MANAGEMENT),
        /** The management key, or none with health_check_no_auth=true (Kubernetes probes). */
        PROBE(KeyType.MANAGEMENT);

        final KeyType key;

        Auth(KeyType key) {
            this.key = key;
        }
    }

    /** Answers a request that matched the route. */
    interface Handler {
        void handle(RouteCall c) throws HttpError;
    }

    /** Adds the operation's parameters, body and answers to the document. */
    interface Doc {
        void describe(OpenApiBuilder.Op op);
    }

    final Api api;
    final HttpMethod method;
    /** The path with {@code {name}} segments, as in the OpenAPI document. */
    final String path;
    final String[] segments;
    final String operationId;
    final String description;
    Auth auth = Auth.MANAGEMENT;
    Handler handler;
    Doc doc = op -> { };
    /** TorchServe's quirk: the route answers every method (the document names only {@link #method}). */
    boolean anyMethod;
    /** The query and JSON body parameters are read before the method is checked (a bad body is 400 first). */
    boolean readsParams;
    /** Only on a cluster member (docs/distributed.md). */
    boolean memberOnly;

    private Route(Api api, HttpMethod method, String path, String operationId, String description) {
        this.api = api;
        this.method = method;
        this.path = path;
        this.segments = RequestHandler.segments(path);
        this.operationId = operationId;
        this.description = description;
    }

    static Route management(HttpMethod method, String path, String operationId, String description) {
        return new Route(Api.MANAGEMENT, method, path, operationId, description);
    }

    Route auth(Auth a) {
        auth = a;
        return this;
    }

    Route handler(Handler h) {
        handler = h;
        return this;
    }

    Route doc(Doc d) {
        doc = d;
        return this;
    }

    Route anyMethod() {
        anyMethod = true;
        return this;
    }

    Route readsParams() {
        readsParams = true;
        return this;
    }

    Route memberOnly() {
        memberOnly = true;
        return this;
    }

    /** The path's segments fit the pattern; a {@code {name}} segment takes any one segment. */
    boolean matchesPath(String[] seg) {
        if (seg.length != segments.length) {
            return false;
        }
        for (int i = 0; i < seg.length; i++) {
            if (!isParam(segments[i]) && !segments[i].equals(seg[i])) {
                return false;
            }
        }
        return true;
    }

    static boolean isParam(String segment) {
        return segment.startsWith("{") && segment.endsWith("}");
    }
}

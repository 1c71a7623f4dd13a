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
        PROBE(KeyType.MANAGEMENT),
        /** The inference key. */
        INFERENCE(KeyType.INFERENCE),
        /** The inference key, or none with health_check_no_auth=true (Kubernetes probes). */
        INFERENCE_PROBE(KeyType.INFERENCE);

        final KeyType key;

        Auth(KeyType key) {
            this.key = key;
        }

        /** health_check_no_auth=true lets the route answer without a token. */
        boolean probe() {
            return this == PROBE || this == INFERENCE_PROBE;
        }
    }

    /** The shape of the route's error bodies, from the token check on. */
    enum Errors {
        /** TorchServe's {@code {"code", "type", "message"}}. */
        TORCHSERVE,
        /** OpenAI's ({@link OpenAiError}). */
        OPENAI,
        /** The Open Inference Protocol's {@code {"error": message}}. */
        OIP
    }

    /** The model and version path parameters. */
    static final String MODEL = "model_name";
    static final String VERSION = "model_version";

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
    /** Another method is as an unknown path (no 405): TorchServe's inference routes fall through to 404. */
    boolean otherMethodsNotHere;
    /** Further segments after the pattern's are allowed ({@link RouteCall#tail}); tried after the exact routes. */
    boolean tail;
    /** Tried after every other route; its leading {@code {name}} never takes a name another route starts with. */
    boolean fallback;
    Errors errors = Errors.TORCHSERVE;

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

    static Route inference(HttpMethod method, String path, String operationId, String description) {
        return new Route(Api.INFERENCE, method, path, operationId, description).auth(Auth.INFERENCE);
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

    Route otherMethodsNotHere() {
        otherMethodsNotHere = true;
        return this;
    }

    Route tail() {
        tail = true;
        return this;
    }

    Route fallback() {
        fallback = true;
        return this;
    }

    Route errorStyle(Errors e) {
        errors = e;
        return this;
    }

    /** Tried only when no exact route has the path ({@link #tail}, {@link #fallback}). */
    boolean lowPriority() {
        return tail || fallback;
    }

    /**
     * The path's segments fit the pattern: a {@code {name}} segment takes any one segment, a
     * {@code {name}:verb} one any segment ending in {@code :verb}; a {@link #tail} route takes more.
     */
    boolean matchesPath(String[] seg) {
        if (tail ? seg.length < segments.length : seg.length != segments.length) {
            return false;
        }
        for (int i = 0; i < segments.length; i++) {
            String p = segments[i];
            String suffix = suffix(p);
            if (suffix != null ? !seg[i].endsWith(suffix) : !isParam(p) && !p.equals(seg[i])) {
                return false;
            }
        }
        return true;
    }

    /** The value a pattern segment's parameter takes from a path segment (before a {@code :verb} suffix). */
    static String value(String pattern, String segment) {
        String suffix = suffix(pattern);
        return suffix == null ? segment : segment.substring(0, segment.length() - suffix.length());
    }

    /** The {@code :verb} after a {@code {name}} pattern segment, else null. */
    private static String suffix(String pattern) {
        int close = pattern.indexOf('}');
        return pattern.startsWith("{") && close > 0 && close < pattern.length() - 1 ? pattern.substring(close + 1) : null;
    }

    /** The parameter a pattern segment names ({@code {name}} or {@code {name}:verb}), else null. */
    static String paramName(String pattern) {
        int close = pattern.indexOf('}');
        return pattern.startsWith("{") && close > 0 ? pattern.substring(1, close) : null;
    }

    static boolean isParam(String segment) {
        return paramName(segment) != null;
    }
}

package org.tserve.http;

import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.QueryStringDecoder;
import java.util.Map;

/** A request matched to a {@link Route}: the exchange, its path parameters and the APIs that answer it. */
final class RouteCall {
    final RouteTable.Apis apis;
    final Exchange ex;
    final FullHttpRequest req;
    final QueryStringDecoder q;
    private final Map<String, String> path;
    /** The segments after a {@link Route#tail} route's pattern, joined by {@code /} ("" when none). */
    final String tail;
    private Params params;

    RouteCall(RouteTable.Apis apis, Exchange ex, FullHttpRequest req, QueryStringDecoder q, Map<String, String> path,
              String tail) {
        this.apis = apis;
        this.ex = ex;
        this.req = req;
        this.q = q;
        this.path = path;
        this.tail = tail;
    }

    /** The segment a {@code {name}} of the route's path matched, null if the path has none. */
    String path(String name) {
        return path.get(name);
    }

    /** The query parameters and a JSON object body's, read once. */
    Params params() throws HttpError {
        if (params == null) {
            params = Params.of(req, q);
        }
        return params;
    }
}

package org.tserve.http;

import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.QueryStringDecoder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.logging.log4j.Logger;
import org.tserve.auth.TokenAuthorization;
import org.tserve.auth.TokenAuthorization.KeyType;
import org.tserve.config.Compatibility;
import org.tserve.config.ConfigManager;
import org.tserve.server.ResponseListeners;
import org.tserve.server.ServerExtension;
import org.tserve.util.LogText;
import org.tserve.util.Logging;

/** Routes one connector's requests: API description, token check, then its API; else 404. */
final class RequestHandler extends SimpleChannelInboundHandler<FullHttpRequest> {
    private static final Logger LOG = Logging.logger(RequestHandler.class);
    /** The error type of a failed token check from a throttled address, and how long its answer waits. */
    private static final String THROTTLED = "TooManyRequestsException";
    static final long THROTTLED_DELAY_MS = 1000;
    private final ConnectorType type;
    private final ConfigManager cfg;
    private final TokenAuthorization tokens;
    private final RouteTable.Apis apis;
    private final List<Route> inferenceRoutes;
    private final List<Route> managementRoutes;
    private final List<ServerExtension> extensions;
    private final ApiDescription description;
    private final ResponseListeners responses;
    private final ServerDrain drain;

    RequestHandler(ConnectorType type, ConfigManager cfg, TokenAuthorization tokens, RouteTable.Apis apis, List<ServerExtension> extensions, ApiDescription description,
            ResponseListeners responses, ServerDrain drain) {
        this.drain = drain;
        this.description = description;
        this.responses = responses;
        this.type = type;
        this.cfg = cfg;
        this.tokens = tokens;
        this.apis = apis;
        this.inferenceRoutes = RouteTable.of(Route.Api.INFERENCE, description.clusterMember());
        this.managementRoutes = RouteTable.of(Route.Api.MANAGEMENT, description.clusterMember());
        this.extensions = extensions;
    }

    /** Path segments without the empty ones (so a trailing slash is ignored, like TorchServe). */
    static String[] segments(String path) {
        List<String> out = new ArrayList<>();
        for (String s : path.split("/")) {
            if (!s.isEmpty()) {
                out.add(QueryStringDecoder.decodeComponent(s));
            }
        }
        return out.toArray(new String[0]);
    }

    /**
     * The path's segments, with the query parameters decoded once here too (QueryStringDecoder
     * keeps them): a {@code %} not followed by two hex digits is a 400 for every route, never an
     * exception inside one.
     */
    private static String[] decode(String uri, QueryStringDecoder q) throws HttpError {
        try {
            String[] seg = segments(q.rawPath());
            q.parameters();
            return seg;
        } catch (IllegalArgumentException e) {
            throw new HttpError(400, "BadRequestException", "Invalid URI " + LogText.quote(uri) + ": " + e.getMessage()
                    + " (a % must start a %XX escape of two hex digits: write a literal % as %25)");
        }
    }

    @Override
    protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) {
        if (!req.decoderResult().isSuccess()) {
            // Netty's decoder skips the rest of the connection's bytes: the answer closes it
            HttpUtil.setKeepAlive(req, false);
        }
        Exchange ex = new Exchange(ctx, req, cfg, responses, drain);
        try {
            if (!req.decoderResult().isSuccess()) {
                throw HttpError.undecodable(req.decoderResult().cause());
            }
            if (drain.draining()) {   // the answer closes the connection (Exchange): the client goes elsewhere
                throw new HttpError(503, "ServiceUnavailableException", "Server is shutting down; send the request "
                        + "to another server or retry once it has restarted");
            }
            QueryStringDecoder q = new QueryStringDecoder(req.uri());
            String[] seg = decode(req.uri(), q);
            if ((seg.length == 0 && req.method().equals(HttpMethod.OPTIONS))
                    || (seg.length == 1 && seg[0].equals("api-description"))) {
                ex.sendJson(200, description.forConnector(type));
                return;
            }
            if (seg.length == 0) {
                aliveOrNot(ctx, req, ex);
                return;
            }
            if (type == ConnectorType.METRICS) {
                for (ServerExtension e : extensions) {
                    FullHttpResponse r = e.handleMetricsRequest(req);
                    if (r != null) {
                        ex.send(r);
                        return;
                    }
                }
                throw HttpError.notFound();
            }
            RouteTable.Match inference = RouteTable.match(inferenceRoutes, seg, req.method());
            RouteTable.Match management = RouteTable.match(managementRoutes, seg, req.method());
            boolean openProbe = cfg.getBool("health_check_no_auth")
                    && (probe(inference) || type != ConnectorType.INFERENCE && probe(management));
            if (type != ConnectorType.MANAGEMENT && (inference.claimed() || RouteTable.inferenceOnly(seg))) {
                Route r = inference.route();
                if (r != null && r.errors == Route.Errors.OPENAI) {
                    ex.useOpenAiErrors();   // from the token check on, errors take OpenAI's shape
                } else if (r != null && r.errors == Route.Errors.OIP) {
                    ex.useOipErrors();
                }
                if (!openProbe) {
                    authorize(ctx, req, KeyType.INFERENCE);
                }
                if (RouteTable.dispatch(inference, apis, ex, req, seg, q)) {
                    return;
                }
            }
            if (type != ConnectorType.INFERENCE) {
                RouteTable.Match m = management;
                // the token is checked before 404 or 405; every /cluster path takes the leader's key
                Route.Auth auth = m.route() != null ? m.route().auth
                        : seg[0].equals("cluster") ? Route.Auth.CLUSTER : Route.Auth.MANAGEMENT;
                if (auth == Route.Auth.CLUSTER) {
                    authorizeCluster(ctx, req);
                } else if (!openProbe) {
                    authorize(ctx, req, auth.key);
                }
                if (RouteTable.dispatch(m, apis, ex, req, seg, q)) {
                    return;
                }
            }
            if (type != ConnectorType.MANAGEMENT && seg[0].equals("v1") && !seg[seg.length - 1].contains(":")) {
                // an unknown /v1/ path (not KServe v1's {m}:verb) is an OpenAI client's: OpenAI's answer to an unknown URL
                ex.sendOpenAiError(new OpenAiError(404, "Invalid URL (" + req.method() + " " + q.path() + "): tserve's "
                        + "OpenAI-compatible routes are /v1/completions, /v1/chat/completions, /v1/models and "
                        + "/v1/models/{id}.", null, null));
                return;
            }
            throw HttpError.notFound();
        } catch (HttpError e) {
            if (e.getStatus() == 429 && e.getType().equals(THROTTLED)) {
                // a throttled failure costs its sender a second and a new connection: guessing stays slow
                ex.closeAfterAnswer();
                ctx.executor().schedule(() -> ex.sendError(e), THROTTLED_DELAY_MS, TimeUnit.MILLISECONDS);
                return;
            }
            ex.sendError(e);
        } catch (RuntimeException e) {
            LOG.error("request " + req.method() + " " + req.uri() + " failed", e);
            ex.sendError(500, "InternalServerException", "Internal error: " + e);
        } catch (StackOverflowError e) {
            // a safety net: input nested too deeply for a recursive library still gets an answer
            LOG.error("request " + req.method() + " " + req.uri() + " overflowed the stack");
            ex.sendError(500, "InternalServerException", "Internal error: the request is nested too deeply to process");
        }
    }

    /**
     * {@code GET /} on an inference connector: KServe v1's liveness, {@code {"status": "alive"}}
     * (the KServe SDK's is_server_live); other methods and connectors answer 405 as before.
     */
    private void aliveOrNot(ChannelHandlerContext ctx, FullHttpRequest req, Exchange ex) throws HttpError {
        if (type == ConnectorType.MANAGEMENT || type == ConnectorType.METRICS || !req.method().equals(HttpMethod.GET)) {
            throw HttpError.methodNotAllowed();
        }
        if (!cfg.getBool("health_check_no_auth")) {
            authorize(ctx, req, KeyType.INFERENCE);
        }
        ex.sendStatus(200, "alive");
    }

    /** The route found answers without a token when health_check_no_auth=true (Kubernetes probes). */
    private static boolean probe(RouteTable.Match m) {
        return m.route() != null && m.route().auth.probe();
    }

    private void authorize(ChannelHandlerContext ctx, FullHttpRequest req, KeyType key) throws HttpError {
        String client = TokenAuthorization.clientAddress(ctx.channel().remoteAddress());
        switch (tokens.verify(key, req.headers().get(HttpHeaderNames.AUTHORIZATION), client)) {
            case ALLOWED:
                return;
            case THROTTLED:
                throw new HttpError(429, THROTTLED,
                        TokenAuthorization.throttledMessage(client, tokens.retryAfterSeconds(client)));
            default:
                Compatibility policy = Compatibility.current();
                throw new HttpError(policy.badKeyStatus(), "InvalidKeyException",
                        policy.badKeyMessage(TokenAuthorization.failureMessage(key)));
        }
    }

    /** The leader's calls: the management key, or the cluster_key every node of a cluster shares. */
    private void authorizeCluster(ChannelHandlerContext ctx, FullHttpRequest req) throws HttpError {
        String header = req.headers().get(HttpHeaderNames.AUTHORIZATION);
        String key = cfg.get("cluster_key");
        if (key != null && !key.isEmpty() && header != null
                && java.security.MessageDigest.isEqual(("Bearer " + key).getBytes(java.nio.charset.StandardCharsets.UTF_8),
                        header.trim().getBytes(java.nio.charset.StandardCharsets.UTF_8))) {
            return;
        }
        authorize(ctx, req, KeyType.MANAGEMENT);
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        LOG.warn("connection from " + ctx.channel().remoteAddress() + " closed after an error: " + cause);
        ctx.close();
    }
}

package org.tserve.http;

import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.QueryStringDecoder;
import java.util.ArrayList;
import java.util.List;
import org.apache.logging.log4j.Logger;
import org.tserve.ServerExtension;
import org.tserve.auth.TokenAuthorization;
import org.tserve.auth.TokenAuthorization.KeyType;
import org.tserve.config.ConfigManager;
import org.tserve.util.Logging;

/** Routes one connector's requests: API description, token check, then its API; else 404. */
final class RequestHandler extends SimpleChannelInboundHandler<FullHttpRequest> {
    private static final Logger LOG = Logging.logger(RequestHandler.class);
    private final ConnectorType type;
    private final ConfigManager cfg;
    private final TokenAuthorization tokens;
    private final InferenceApi inference;
    private final ManagementApi management;
    private final List<ServerExtension> extensions;

    RequestHandler(ConnectorType type, ConfigManager cfg, TokenAuthorization tokens, InferenceApi inference,
                   ManagementApi management, List<ServerExtension> extensions) {
        this.type = type;
        this.cfg = cfg;
        this.tokens = tokens;
        this.inference = inference;
        this.management = management;
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

    @Override
    protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) {
        Exchange ex = new Exchange(ctx, req, cfg);
        try {
            if (!req.decoderResult().isSuccess()) {
                throw new HttpError(400, "Invalid HTTP request: " + req.decoderResult().cause());
            }
            QueryStringDecoder q = new QueryStringDecoder(req.uri());
            String[] seg = segments(q.rawPath());
            if ((seg.length == 0 && req.method().equals(HttpMethod.OPTIONS))
                    || (seg.length == 1 && seg[0].equals("api-description"))) {
                ex.sendJson(200, ApiDescription.forConnector(type));
                return;
            }
            if (seg.length == 0) {
                throw HttpError.methodNotAllowed();
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
            boolean inferenceRoute = type != ConnectorType.MANAGEMENT && isInferenceRoute(seg);
            if (inferenceRoute && OpenAiApi.route(seg) != null) {
                ex.useOpenAiErrors();   // from the token check on, errors take OpenAI's shape
            }
            if (inferenceRoute) {
                authorize(ctx, req, KeyType.INFERENCE);
                if (inference.handle(ex, req, seg, q)) {
                    return;
                }
            }
            if (type != ConnectorType.INFERENCE) {
                if (seg[0].equals("cluster")) {
                    authorizeCluster(ctx, req);
                } else {
                    authorize(ctx, req, seg[0].equals("token") && seg.length == 1 ? KeyType.API : KeyType.MANAGEMENT);
                }
                if (management.handle(ex, req, seg, q)) {
                    return;
                }
            }
            throw HttpError.notFound();
        } catch (HttpError e) {
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

    private static boolean isInferenceRoute(String[] seg) {
        switch (seg[0]) {
            case "ping":
            case "predictions":
            case "explanations":
                return true;
            case "v1":
                return OpenAiApi.route(seg) != null || seg.length == 3 && seg[1].equals("models")
                        && (seg[2].endsWith(":predict") || seg[2].endsWith(":explain"));
            case "v2":
            case "invocations":
                return true;
            case "models":
                return seg.length == 3 && seg[2].equals("invoke");
            default:
                return InferenceApi.isLegacyPredict(seg);
        }
    }

    private void authorize(ChannelHandlerContext ctx, FullHttpRequest req, KeyType key) throws HttpError {
        String client = TokenAuthorization.clientAddress(ctx.channel().remoteAddress());
        switch (tokens.verify(key, req.headers().get(HttpHeaderNames.AUTHORIZATION), client)) {
            case ALLOWED:
                return;
            case THROTTLED:
                throw new HttpError(429, "TooManyRequestsException",
                        TokenAuthorization.throttledMessage(client, tokens.retryAfterSeconds(client)));
            default:
                throw new HttpError(401, "InvalidKeyException", TokenAuthorization.failureMessage(key));
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

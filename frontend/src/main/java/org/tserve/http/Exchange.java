package org.tserve.http;

import com.google.gson.Gson;
import com.google.gson.GsonBuilder;
import com.google.gson.JsonObject;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.util.AsciiString;
import io.netty.util.Attribute;
import io.netty.util.AttributeKey;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicBoolean;
import org.tserve.config.ConfigManager;
import org.tserve.server.ResponseListeners;
import org.tserve.util.AccessLog;
import org.tserve.util.Logging;

/**
 * One HTTP request/response: what was asked (copied out of the Netty request, which is released
 * after the handler returns) and how to answer it exactly once, with the common headers, keeping
 * the connection alive (also after errors) and one access-log line.
 */
final class Exchange {
    static final Gson GSON = new GsonBuilder().setPrettyPrinting().disableHtmlEscaping().create();

    final ChannelHandlerContext ctx;
    final String method;
    final String uri;
    final String protocol;
    final boolean keepAlive;
    /** The answer closes the connection whatever the client asked (see {@link #closeAfterAnswer}). */
    private volatile boolean mustClose;
    final String requestId = org.tserve.util.Ids.fastUuid();
    /** The model the request is for, once routed (for the access log's context); null for other routes. */
    String model;
    private final long start = System.nanoTime();
    private final ConfigManager cfg;
    private final ResponseListeners responses;
    /** A stopping server's answers close their connections. */
    private final ServerDrain drain;
    private final AtomicBoolean finished = new AtomicBoolean();
    private volatile boolean openAiErrors;
    /** Errors take the Open Inference Protocol generate extension's shape, {@code {"error": message}}. */
    private volatile boolean oipErrors;

    Exchange(ChannelHandlerContext ctx, FullHttpRequest req, ConfigManager cfg, ResponseListeners responses,
             ServerDrain drain) {
        this.drain = drain;
        this.responses = responses;
        this.ctx = ctx;
        this.method = req.method().name();
        this.uri = req.uri();
        this.protocol = req.protocolVersion().text();
        this.keepAlive = HttpUtil.isKeepAlive(req);
        this.cfg = cfg;
    }

    private static final AsciiString X_REQUEST_ID = AsciiString.cached("x-request-id");
    private static final AsciiString NO_CACHE = AsciiString.cached("no-cache");
    private static final AsciiString CACHE_CONTROL = AsciiString.cached("no-cache; no-store, must-revalidate, private");
    private static final AsciiString EXPIRES = AsciiString.cached("Thu, 01 Jan 1970 00:00:00 UTC");
    private static final AsciiString EVENT_STREAM = AsciiString.cached("text/event-stream");
    private static final AsciiString X_ACCEL_BUFFERING = AsciiString.cached("x-accel-buffering");
    /** Seconds a client should wait before retrying a 429/503 (OpenAI clients honour it). */
    private static final String RETRY_AFTER_S = "1";

    /** Adds x-request-id, the no-cache headers and CORS headers (when configured). */
    void commonHeaders(HttpHeaders h) {
        h.set(X_REQUEST_ID, requestId);
        h.set(HttpHeaderNames.PRAGMA, NO_CACHE);
        h.set(HttpHeaderNames.CACHE_CONTROL, CACHE_CONTROL);
        h.set(HttpHeaderNames.EXPIRES, EXPIRES);
        String origin = cfg.get("cors_allowed_origin");
        if (origin != null && !origin.isEmpty()) {
            h.set(HttpHeaderNames.ACCESS_CONTROL_ALLOW_ORIGIN, origin);
            String methods = cfg.get("cors_allowed_methods");
            if (methods != null && !methods.isEmpty()) {
                h.set(HttpHeaderNames.ACCESS_CONTROL_ALLOW_METHODS, methods);
            }
            String headers = cfg.get("cors_allowed_headers");
            if (headers != null && !headers.isEmpty()) {
                h.set(HttpHeaderNames.ACCESS_CONTROL_ALLOW_HEADERS, headers);
            }
        }
        if (keepOpen()) {
            h.set(HttpHeaderNames.CONNECTION, HttpHeaderValues.KEEP_ALIVE);
        } else {
            h.set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        }
    }

    /** Whether the connection stays open after this answer (the headers say so as it is sent). */
    private boolean keepOpen() {
        return keepAlive && !mustClose && !drain.draining();
    }

    /** Sends a full response (once); closes the connection only if the client did not ask for keep-alive. */
    void send(FullHttpResponse resp) {
        if (!finished.compareAndSet(false, true)) {
            resp.release();
            return;
        }
        boolean open = keepOpen();   // decided once: a stop that starts now must not leave "keep-alive" on a closing answer
        commonHeaders(resp.headers());
        if (!open) {
            resp.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        }
        HttpUtil.setContentLength(resp, resp.content().readableBytes());
        log(resp.status().code());
        if (open) {
            ctx.writeAndFlush(resp).addListener(CLOSE_ON_FAILURE_LOGGED);
        } else {
            ctx.writeAndFlush(resp).addListener(LingeringClose.INSTANCE);
        }
    }

    /**
     * A response that fails on its way out (the encoder refused it) closes the connection, so
     * that the client is not left waiting for an answer that will never come.
     */
    private static final ChannelFutureListener CLOSE_ON_FAILURE_LOGGED = f -> {
        if (!f.isSuccess() && f.channel().isActive()) {
            Logging.logger(Exchange.class).warn("A response could not be written ("
                    + f.cause() + "); closing the connection of " + f.channel().remoteAddress());
            f.channel().close();
        }
    };

    /** Starts a chunked response (streaming); the caller writes contents and the last content. */
    void startChunked(HttpResponse head) {
        commonHeaders(head.headers());
        String ct = head.headers().get(HttpHeaderNames.CONTENT_TYPE);
        if (ct != null && AsciiString.regionMatches(ct, true, 0, EVENT_STREAM, 0, EVENT_STREAM.length())) {
            // Server-Sent Events: every chunk is flushed as it comes; tell caches and proxies
            // (nginx buffers unless told) not to hold the stream back either
            head.headers().set(HttpHeaderNames.CACHE_CONTROL, NO_CACHE);
            head.headers().set(X_ACCEL_BUFFERING, "no");
        }
        HttpUtil.setTransferEncodingChunked(head, true);
        ctx.writeAndFlush(head).addListener(CLOSE_ON_FAILURE_LOGGED);
    }

    /** Ends a chunked response started with {@link #startChunked}. */
    void finishChunked(int status, io.netty.handler.codec.http.LastHttpContent last) {
        if (!finished.compareAndSet(false, true)) {
            last.release();
            return;
        }
        log(status);
        if (keepAlive && !drain.draining()) {
            ctx.writeAndFlush(last).addListener(CLOSE_ON_FAILURE_LOGGED);
        } else {
            ctx.writeAndFlush(last).addListener(LingeringClose.INSTANCE);
        }
    }

    /** The request's inputs ({@link InputParser#parts}) under the form limits of the config. */
    java.util.List<org.tserve.wlm.api.Part> parts(io.netty.handler.codec.http.FullHttpRequest req) throws HttpError {
        return InputParser.parts(req, FormLimits.from(cfg));
    }

    /** The answer, when it is sent, closes the connection (a throttled client must reconnect). */
    void closeAfterAnswer() {
        mustClose = true;
    }

    boolean isFinished() {
        return finished.get();
    }

    void sendJson(int status, Object body) {
        send(json(status, (body instanceof String ? body : GSON.toJson(body)) + "\n"));
    }

    private static FullHttpResponse json(int status, String text) {
        ByteBuf buf = Unpooled.copiedBuffer(text, StandardCharsets.UTF_8);
        FullHttpResponse resp = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.valueOf(status), buf);
        resp.headers().set(HttpHeaderNames.CONTENT_TYPE, "application/json");
        return resp;
    }

    /** {@code {"status": message}} with the given code (TorchServe's StatusResponse). */
    void sendStatus(int status, String message) {
        JsonObject o = new JsonObject();
        o.addProperty("status", message);
        sendJson(status, o);
    }

    /**
     * Errors of this exchange take OpenAI's shape ({@link OpenAiError}): set by the router for the
     * OpenAI-compatible routes before anything can fail (token check included).
     */
    void useOpenAiErrors() {
        openAiErrors = true;
    }

    boolean openAiErrors() {
        return openAiErrors;
    }

    /** Errors of this exchange are {@code {"error": message}} (the OIP generate routes), from the token check on. */
    void useOipErrors() {
        oipErrors = true;
    }

    boolean oipErrors() {
        return oipErrors;
    }

    /** On the OpenAI and OIP generate routes the handler shapes its own error bodies: they pass through. */
    boolean handlerShapesErrors() {
        return openAiErrors || oipErrors;
    }

    /** An OpenAI-shaped error, with {@code Retry-After} when retrying later may succeed (429, 503). */
    void sendOpenAiError(OpenAiError e) {
        FullHttpResponse resp = json(e.status, e.compactJson() + "\n");
        if (e.retryable()) {
            resp.headers().set(HttpHeaderNames.RETRY_AFTER, RETRY_AFTER_S);
        }
        send(resp);
    }

    /** TorchServe's ErrorResponse: {@code {"code", "type", "message"}} (OpenAI's shape on its routes). */
    void sendError(int status, String type, String message) {
        if (openAiErrors) {
            sendOpenAiError(OpenAiError.of(status, message));
            return;
        }
        if (oipErrors) {
            JsonObject o = new JsonObject();
            o.addProperty("error", message);
            sendJson(status, o);
            return;
        }
        JsonObject o = new JsonObject();
        o.addProperty("code", status);
        o.addProperty("type", type);
        o.addProperty("message", message);
        sendJson(status, o);
    }

    void sendError(HttpError e) {
        sendError(e.getStatus(), e.getType(), e.getMessage());
    }

    private void log(int status) {
        responses.sent(status);   // Requests2XX/4XX/5XX
        if (AccessLog.enabled()) {   // off: nothing to format
            AccessLog.request(client(ctx), method, uri, protocol, status, (System.nanoTime() - start) / 1_000_000,
                    requestId, model);
        }
    }

    private static final AttributeKey<String> CLIENT = AttributeKey.valueOf("tserve.client");

    /** The client's address for the access log, computed once per connection. */
    private static String client(ChannelHandlerContext ctx) {
        Attribute<String> attr = ctx.channel().attr(CLIENT);
        String c = attr.get();
        if (c == null) {
            c = AccessLog.client(ctx.channel().remoteAddress());
            attr.set(c);
        }
        return c;
    }
}

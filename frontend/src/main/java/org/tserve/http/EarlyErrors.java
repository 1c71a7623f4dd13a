package org.tserve.http;

import com.google.gson.JsonObject;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpMessage;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import java.nio.charset.StandardCharsets;
import org.tserve.util.AccessLog;

/**
 * Answers given by the pipeline's handlers before a request reaches {@link RequestHandler}
 * (too large, undecodable body, too many connections, too slow): TorchServe's JSON error shape.
 */
final class EarlyErrors {
    private EarlyErrors() {
    }

    /** TorchServe's error JSON for {@code status}. */
    static FullHttpResponse error(HttpResponseStatus status, String type, String message) {
        JsonObject o = new JsonObject();
        o.addProperty("code", status.code());
        o.addProperty("type", type);
        o.addProperty("message", message);
        FullHttpResponse resp = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, status,
                Unpooled.copiedBuffer(Exchange.GSON.toJson(o) + "\n", StandardCharsets.UTF_8));
        resp.headers().set(HttpHeaderNames.CONTENT_TYPE, "application/json");
        HttpUtil.setContentLength(resp, resp.content().readableBytes());
        return resp;
    }

    /** The 413 of a body above max_request_size (counted after decompressing a Content-Encoding). */
    static FullHttpResponse tooLarge(int limit) {
        return error(HttpResponseStatus.REQUEST_ENTITY_TOO_LARGE, "RequestEntityTooLargeException", "Request body is "
                + "larger than max_request_size (" + limit + " bytes; a compressed body counts decompressed); send less "
                + "data or raise max_request_size");
    }

    /**
     * Logs and sends {@code resp} to the request {@code m}, then closes the connection: the rest of
     * that request's body is unread, and cannot be told apart from a next request.
     */
    static void sendAndClose(ChannelHandlerContext ctx, HttpMessage m, FullHttpResponse resp) {
        access(ctx.channel(), m, resp.status().code());
        resp.headers().set(HttpHeaderNames.CONNECTION, "close");
        ctx.writeAndFlush(resp).addListener(LingeringClose.INSTANCE);
    }

    /** An access-log line for a request answered here (when the access log is on). */
    static void access(Channel ch, HttpMessage m, int status) {
        if (!AccessLog.enabled()) {
            return;
        }
        String method = "GET";   // TorchServe's Session, for a request it could not decode
        String uri = "?";
        String protocol = "HTTP/1.1";
        if (m instanceof HttpRequest) {
            HttpRequest r = (HttpRequest) m;
            method = r.method().name();
            uri = r.uri();
            protocol = r.protocolVersion().text();
        }
        AccessLog.request(AccessLog.client(ch.remoteAddress()), method, uri, protocol, status, 0, null, null);
    }
}

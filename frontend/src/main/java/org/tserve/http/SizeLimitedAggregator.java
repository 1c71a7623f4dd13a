package org.tserve.http;

import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpMessage;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import java.nio.charset.StandardCharsets;
import org.tserve.util.AccessLog;

/** Aggregates requests up to max_request_size; a larger one gets a 413 with a JSON error body. */
final class SizeLimitedAggregator extends HttpObjectAggregator {
    private final int limit;

    SizeLimitedAggregator(int limit) {
        super(limit);
        this.limit = limit;
    }

    /** TorchServe's error JSON for {@code status}. */
    static FullHttpResponse error(HttpResponseStatus status, String type, String message) {
        com.google.gson.JsonObject o = new com.google.gson.JsonObject();
        o.addProperty("code", status.code());
        o.addProperty("type", type);
        o.addProperty("message", message);
        FullHttpResponse resp = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, status,
                Unpooled.copiedBuffer(Exchange.GSON.toJson(o) + "\n", StandardCharsets.UTF_8));
        resp.headers().set(HttpHeaderNames.CONTENT_TYPE, "application/json");
        HttpUtil.setContentLength(resp, resp.content().readableBytes());
        return resp;
    }

    private FullHttpResponse tooLarge() {
        return error(HttpResponseStatus.REQUEST_ENTITY_TOO_LARGE, "RequestEntityTooLargeException", "Request body is "
                + "larger than max_request_size (" + limit + " bytes); send less data or raise max_request_size");
    }

    private static void access(io.netty.channel.Channel ch, HttpMessage m, int status) {
        if (!AccessLog.enabled()) {
            return;
        }
        String method = "?";
        String uri = "?";
        String protocol = "?";
        if (m instanceof io.netty.handler.codec.http.HttpRequest) {
            io.netty.handler.codec.http.HttpRequest r = (io.netty.handler.codec.http.HttpRequest) m;
            method = r.method().name();
            uri = r.uri();
            protocol = r.protocolVersion().text();
        }
        java.net.SocketAddress a = ch.remoteAddress();
        String client = a instanceof java.net.InetSocketAddress
                ? ((java.net.InetSocketAddress) a).getAddress().getHostAddress() : String.valueOf(a);
        AccessLog.request(client, method, uri, protocol, status, 0, null, null);
    }

    /**
     * With {@code Expect: 100-continue}, Netty answers a too large body (413) or an unknown
     * expectation (417) itself, with an empty body: these get the JSON error too.
     */
    @Override
    protected Object newContinueResponse(HttpMessage start, int maxContentLength, io.netty.channel.ChannelPipeline pipeline) {
        Object r = super.newContinueResponse(start, maxContentLength, pipeline);
        if (r instanceof FullHttpResponse) {
            FullHttpResponse netty = (FullHttpResponse) r;
            int code = netty.status().code();
            if (code == 413 || code == 417) {
                netty.release();
                access(pipeline.channel(), start, code);
                return code == 413 ? tooLarge() : error(HttpResponseStatus.EXPECTATION_FAILED, "ExpectationFailedException",
                        "Only the expectation 100-continue is supported; remove the Expect header");
            }
        }
        return r;
    }

    @Override
    protected void handleOversizedMessage(ChannelHandlerContext ctx, HttpMessage oversized) {
        FullHttpResponse resp = tooLarge();
        access(ctx.channel(), oversized, 413);
        // The unread rest of the body cannot be told apart from a next request unless the client
        // waits for 100-continue, so the connection is closed after the 413 otherwise.
        boolean keep = HttpUtil.is100ContinueExpected(oversized) && HttpUtil.isKeepAlive(oversized);
        if (keep) {
            ctx.writeAndFlush(resp);
        } else {
            resp.headers().set(HttpHeaderNames.CONNECTION, "close");
            ctx.writeAndFlush(resp).addListener(ChannelFutureListener.CLOSE);
        }
    }
}

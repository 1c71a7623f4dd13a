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
import java.util.logging.Logger;
import org.tserve.util.Logging;

/** Aggregates requests up to max_request_size; a larger one gets a 413 with a JSON error body. */
final class SizeLimitedAggregator extends HttpObjectAggregator {
    private static final Logger ACCESS = Logger.getLogger(Logging.ACCESS_LOG);
    private final int limit;

    SizeLimitedAggregator(int limit) {
        super(limit);
        this.limit = limit;
    }

    @Override
    protected void handleOversizedMessage(ChannelHandlerContext ctx, HttpMessage oversized) {
        String msg = "{\n  \"code\": 413,\n  \"type\": \"RequestEntityTooLargeException\",\n  \"message\": \"Request body is "
                + "larger than max_request_size (" + limit + " bytes); send less data or raise max_request_size\"\n}\n";
        FullHttpResponse resp = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.REQUEST_ENTITY_TOO_LARGE,
                Unpooled.copiedBuffer(msg, StandardCharsets.UTF_8));
        resp.headers().set(HttpHeaderNames.CONTENT_TYPE, "application/json");
        HttpUtil.setContentLength(resp, resp.content().readableBytes());
        String line = "?";
        if (oversized instanceof io.netty.handler.codec.http.HttpRequest) {
            io.netty.handler.codec.http.HttpRequest r = (io.netty.handler.codec.http.HttpRequest) oversized;
            line = r.method().name() + " " + r.uri() + " " + r.protocolVersion().text();
        }
        java.net.SocketAddress a = ctx.channel().remoteAddress();
        String client = a instanceof java.net.InetSocketAddress
                ? ((java.net.InetSocketAddress) a).getAddress().getHostAddress() : String.valueOf(a);
        ACCESS.info(client + " \"" + line + "\" 413 0ms");
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

package org.tserve.http;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.LastHttpContent;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.logging.log4j.Logger;
import org.tserve.util.Logging;

/**
 * Time limits of one connection, and the server's cap on connections. A connection with no
 * request in flight is closed after {@code connection_idle_timeout} seconds without traffic; a
 * request whose headers and body are not all read within {@code request_read_timeout} seconds of
 * its first byte gets 408 and the connection is closed. A request being answered (a slow
 * inference, a long stream) is never cut. All state is touched on the channel's event loop only.
 */
final class ConnectionGuard {
    private static final Logger LOG = Logging.logger(ConnectionGuard.class);

    private final long idleMillis;
    private final long readMillis;
    private Channel channel;
    /** Requests read completely and not yet answered completely. */
    private int inFlight;
    /** A request has started arriving (its first byte) and is not read completely yet. */
    private boolean reading;
    private long lastActivity = System.nanoTime();
    private ScheduledFuture<?> idleTimer;
    private ScheduledFuture<?> readTimer;

    ConnectionGuard(long idleSeconds, long readSeconds) {
        this.idleMillis = idleSeconds * 1000;
        this.readMillis = readSeconds * 1000;
    }

    /**
     * Counts a new connection against {@code max} (0 = no cap); true when it may stay. One over
     * the cap is answered 503 (plain HTTP) or closed at once (TLS); its slot is freed when it closes.
     */
    static boolean admit(Channel ch, AtomicInteger open, int max, boolean tls) {
        int n = open.incrementAndGet();
        ch.closeFuture().addListener(f -> open.decrementAndGet());
        if (max <= 0 || n <= max) {
            return true;
        }
        LOG.warn("connection from " + ch.remoteAddress() + " refused: " + (n - 1) + " connections are open, "
                + "max_connections is " + max);
        if (tls) {
            ch.close();
        } else {
            FullHttpResponse r = EarlyErrors.error(HttpResponseStatus.SERVICE_UNAVAILABLE,
                    "ServiceUnavailableException", "Too many open connections: the server's max_connections (" + max
                            + ") is reached; retry later");
            r.headers().set(HttpHeaderNames.CONNECTION, "close");
            // written as bytes: this connection gets no HTTP pipeline
            ByteBuf head = Unpooled.copiedBuffer("HTTP/1.1 503 Service Unavailable\r\n" + headers(r) + "\r\n",
                    StandardCharsets.US_ASCII);
            ch.writeAndFlush(Unpooled.wrappedBuffer(head, r.content())).addListener(ChannelFutureListener.CLOSE);
        }
        return false;
    }

    private static String headers(FullHttpResponse r) {
        StringBuilder sb = new StringBuilder();
        r.headers().forEach(h -> sb.append(h.getKey()).append(": ").append(h.getValue()).append("\r\n"));
        return sb.toString();
    }

    /** Goes before the HTTP codec: sees a request's first bytes. */
    ChannelDuplexHandler bytes() {
        return new ChannelDuplexHandler() {
            @Override
            public void handlerAdded(ChannelHandlerContext ctx) {
                channel = ctx.channel();
            }

            @Override
            public void channelActive(ChannelHandlerContext ctx) throws Exception {
                scheduleIdle();
                super.channelActive(ctx);
            }

            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) throws Exception {
                if (LingeringClose.dropped(ctx.channel(), msg)) {
                    return;
                }
                lastActivity = System.nanoTime();
                if (!reading && msg instanceof ByteBuf && ((ByteBuf) msg).isReadable() && readMillis > 0) {
                    reading = true;
                    readTimer = ctx.executor().schedule(ConnectionGuard.this::readTimedOut, readMillis, TimeUnit.MILLISECONDS);
                }
                super.channelRead(ctx, msg);
            }

            @Override
            public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) throws Exception {
                lastActivity = System.nanoTime();
                super.write(ctx, msg, promise);
            }

            @Override
            public void channelInactive(ChannelHandlerContext ctx) throws Exception {
                cancel(idleTimer);
                cancel(readTimer);
                super.channelInactive(ctx);
            }
        };
    }

    /** Goes right after the HTTP codec: sees whole requests arrive and whole responses leave. */
    ChannelDuplexHandler messages() {
        return new ChannelDuplexHandler() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) throws Exception {
                if (msg instanceof LastHttpContent) {
                    reading = false;
                    cancel(readTimer);
                    inFlight++;
                }
                super.channelRead(ctx, msg);
            }

            @Override
            public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) throws Exception {
                boolean informational = msg instanceof HttpResponse && ((HttpResponse) msg).status().codeClass()
                        == io.netty.handler.codec.http.HttpStatusClass.INFORMATIONAL;
                if (msg instanceof LastHttpContent && !informational && inFlight > 0) {
                    inFlight--;
                }
                super.write(ctx, msg, promise);
            }
        };
    }

    private void scheduleIdle() {
        if (idleMillis > 0) {
            idleTimer = channel.eventLoop().schedule(this::idleCheck, idleMillis, TimeUnit.MILLISECONDS);
        }
    }

    private void idleCheck() {
        if (!channel.isActive()) {
            return;
        }
        long quiet = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - lastActivity);
        if (inFlight == 0 && !reading && quiet >= idleMillis) {
            LOG.debug("connection from " + channel.remoteAddress() + " closed: idle for connection_idle_timeout");
            channel.close();
            return;
        }
        long next = inFlight == 0 && !reading ? idleMillis - quiet : idleMillis;
        idleTimer = channel.eventLoop().schedule(this::idleCheck, Math.max(1, next), TimeUnit.MILLISECONDS);
    }

    private void readTimedOut() {
        if (!reading || !channel.isActive()) {
            return;
        }
        LOG.info("connection from " + channel.remoteAddress() + " closed: a request was not read completely within "
                + "request_read_timeout (" + readMillis / 1000 + " s)");
        if (inFlight > 0) {   // an answer is still owed on this connection: no 408 ahead of it
            channel.close();
            return;
        }
        FullHttpResponse r = EarlyErrors.error(HttpResponseStatus.REQUEST_TIMEOUT, "RequestTimeoutException",
                "The request was not received completely within request_read_timeout (" + readMillis / 1000 + " s)");
        r.headers().set(HttpHeaderNames.CONNECTION, "close");
        // straight to the codec's encoder (the pipeline's head side), past the request state; the
        // client is still sending (that is why it timed out): linger, so no reset destroys the 408
        channel.writeAndFlush(r).addListener(LingeringClose.INSTANCE);
    }

    private static void cancel(ScheduledFuture<?> f) {
        if (f != null) {
            f.cancel(false);
        }
    }
}

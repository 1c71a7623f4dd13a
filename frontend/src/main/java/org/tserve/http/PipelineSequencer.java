package org.tserve.http;

import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpStatusClass;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.ReferenceCountUtil;
import java.util.ArrayDeque;
import org.apache.logging.log4j.Logger;
import org.tserve.util.Logging;

/**
 * Answers pipelined HTTP/1.1 requests in request order (RFC 9112 §9.3.2). A request is handed on
 * only when every answer before it has been written completely (its {@link LastHttpContent}):
 * later requests wait here, decoded, so a slow prediction followed by a fast one is answered slow
 * first. Every kind of answer is ordered by construction, streamed ones and early errors included,
 * because only one request of a connection is ever past this point. A client wanting parallelism
 * opens more connections, as browsers and proxies do.
 *
 * <p>At most {@link #MAX_HELD} requests wait per connection; while their bodies hold more than
 * max_request_size bytes the socket is not read (TCP pushes back on the client). Requests past the
 * count (many tiny ones in one read) are dropped unanswered, and the connection closes once the
 * held ones are answered: HTTP/1.1 lets a client retry requests a closed connection left
 * unanswered. Lives right after the HTTP codec; all state is touched on the channel's event loop.
 */
final class PipelineSequencer extends ChannelDuplexHandler {
    private static final Logger LOG = Logging.logger(PipelineSequencer.class);
    /** Requests one connection may have waiting behind the one being answered. */
    static final int MAX_HELD = 64;
    /** Netty's own pipelining cap (HttpServerCodec closes past it): above ours, so ours acts first. */
    static final int CODEC_DEPTH = 4 * MAX_HELD;

    /** Decoded messages not yet handed on (heads, body pieces, ends), in arrival order. */
    private final ArrayDeque<Object> waiting = new ArrayDeque<>();
    /** Requests in {@link #waiting} (their heads). */
    private int held;
    /** A request has been handed on and its answer is not written completely yet. */
    private boolean answering;
    /** Requests were dropped past the bound: close once the held ones are answered. */
    private boolean overflow;
    /** An answer said {@code Connection: close}: no later request is handed on (or processed). */
    private boolean closing;
    private boolean drainScheduled;
    /** Body bytes in {@link #waiting}, and the amount above which the socket is not read. */
    private long heldBytes;
    private final long maxHeldBytes;

    PipelineSequencer(long maxHeldBytes) {
        this.maxHeldBytes = maxHeldBytes;
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (overflow || closing) {
            ReferenceCountUtil.release(msg);
            return;
        }
        if (msg instanceof HttpRequest) {
            if (!answering && waiting.isEmpty()) {
                answering = true;
                ctx.fireChannelRead(msg);
                return;
            }
            if (held >= MAX_HELD) {
                overflow = true;
                ctx.channel().config().setAutoRead(false);
                LOG.warn("connection from " + ctx.channel().remoteAddress() + " pipelined more than " + MAX_HELD
                        + " requests: the rest are dropped and the connection closes after the held ones' answers");
                ReferenceCountUtil.release(msg);
                return;
            }
            held++;
        }
        if (waiting.isEmpty() && !(msg instanceof HttpRequest)) {
            ctx.fireChannelRead(msg);   // a piece of the request being handed on
            return;
        }
        waiting.add(msg);
        heldBytes += bytes(msg);
        if (heldBytes > maxHeldBytes) {
            ctx.channel().config().setAutoRead(false);   // read on once the waiting requests are handed on
        }
    }

    @Override
    public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
        boolean informational = msg instanceof HttpResponse
                && ((HttpResponse) msg).status().codeClass() == HttpStatusClass.INFORMATIONAL;
        if (msg instanceof HttpResponse && !informational && !HttpUtil.isKeepAlive((HttpResponse) msg)) {
            closing = true;
            release();
        }
        ctx.write(msg, promise);
        if (msg instanceof LastHttpContent && !informational && answering) {
            answering = false;
            if (!drainScheduled) {
                // after this write returns: the next request's handler may write at once
                drainScheduled = true;
                ctx.executor().execute(() -> drain(ctx));
            }
        }
    }

    /** Hands on the next waiting request (its head and the pieces of it that have arrived). */
    private void drain(ChannelHandlerContext ctx) {
        drainScheduled = false;
        if (answering || closing || !ctx.channel().isActive()) {
            return;
        }
        if (waiting.isEmpty()) {
            if (overflow) {
                ctx.close();
            } else {
                ctx.channel().config().setAutoRead(true);
            }
            return;
        }
        held--;
        answering = true;
        handOn(ctx, waiting.poll());
        while (!waiting.isEmpty() && !(waiting.peek() instanceof HttpRequest)) {
            handOn(ctx, waiting.poll());
        }
        if (!overflow && heldBytes <= maxHeldBytes) {
            ctx.channel().config().setAutoRead(true);
        }
    }

    private void handOn(ChannelHandlerContext ctx, Object msg) {
        heldBytes -= bytes(msg);
        ctx.fireChannelRead(msg);
    }

    private static long bytes(Object msg) {
        return msg instanceof HttpContent ? ((HttpContent) msg).content().readableBytes() : 0;
    }

    @Override
    public void handlerRemoved(ChannelHandlerContext ctx) {
        release();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) throws Exception {
        release();
        super.channelInactive(ctx);
    }

    private void release() {
        Object m;
        while ((m = waiting.poll()) != null) {
            ReferenceCountUtil.release(m);
        }
        held = 0;
        heldBytes = 0;
    }
}

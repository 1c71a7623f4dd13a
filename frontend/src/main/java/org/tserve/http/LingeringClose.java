package org.tserve.http;

import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.socket.DuplexChannel;
import io.netty.handler.ssl.SslHandler;
import io.netty.util.AttributeKey;
import io.netty.util.ReferenceCountUtil;
import java.util.concurrent.TimeUnit;

/**
 * Closes a connection after its last answer the way RFC 9112 §9.6 advises: the sending side is
 * shut down first (the client reads the answer, then EOF) and what the client still sends is read
 * and dropped for up to {@link #LINGER_MS}, then the socket closes. Closed at once instead, a
 * socket with unread bytes (a pipelined request after a refused one, the rest of a refused body)
 * sends a TCP reset, which can destroy the answer in the client's buffer before it is read.
 * TLS connections close at once (their close_notify needs the TLS handler).
 */
final class LingeringClose implements ChannelFutureListener {
    static final LingeringClose INSTANCE = new LingeringClose();
    /** Longest a closing connection's input is drained. */
    static final long LINGER_MS = 2000;
    private static final AttributeKey<Boolean> DRAINING = AttributeKey.valueOf("tserve.draining");

    private LingeringClose() {
    }

    @Override
    public void operationComplete(ChannelFuture f) {
        Channel ch = f.channel();
        if (!(ch instanceof DuplexChannel) || !ch.isActive() || ch.pipeline().get(SslHandler.class) != null) {
            ch.close();
            return;
        }
        ch.attr(DRAINING).set(Boolean.TRUE);
        ((DuplexChannel) ch).shutdownOutput().addListener(done -> {
            if (!done.isSuccess()) {
                ch.close();
            }
        });
        ch.config().setAutoRead(true);
        ch.eventLoop().schedule((Runnable) ch::close, LINGER_MS, TimeUnit.MILLISECONDS);
    }

    /**
     * Whether {@code msg} read from {@code ch} is dropped (and released): the connection is
     * closing, nothing it sends is a request any more.
     */
    static boolean dropped(Channel ch, Object msg) {
        if (!Boolean.TRUE.equals(ch.attr(DRAINING).get())) {
            return false;
        }
        ReferenceCountUtil.release(msg);
        return true;
    }
}

package org.tserve.grpc;

import io.netty.channel.Channel;
import io.netty.channel.ChannelFactory;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ServerChannel;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.logging.log4j.Logger;
import org.tserve.util.Logging;

/**
 * The cap on open connections of one gRPC port ({@code grpc_max_connections}). grpc-java has no
 * such limit, so the server channel gets this handler in front of Netty's acceptor: a connection
 * over the cap is closed before any HTTP/2 byte is read, and its slot count drops when one closes.
 * Refusals are logged at most once every 10 s, with how many there were.
 */
@ChannelHandler.Sharable
final class ConnectionCap extends ChannelInboundHandlerAdapter {
    private static final Logger LOG = Logging.logger(ConnectionCap.class);
    private static final long LOG_EVERY_NANOS = TimeUnit.SECONDS.toNanos(10);

    private final String port;
    private final int max;
    private final AtomicInteger open = new AtomicInteger();
    private final AtomicLong refused = new AtomicLong();
    private final AtomicLong nextLog = new AtomicLong(System.nanoTime());

    ConnectionCap(String port, int max) {
        this.port = port;
        this.max = max;
    }

    /** A factory of {@code type} server channels that carry this cap (0 or less: no cap). */
    ChannelFactory<ServerChannel> channelFactory(Class<? extends ServerChannel> type) {
        return () -> {
            try {
                ServerChannel ch = type.getDeclaredConstructor().newInstance();
                if (max > 0) {
                    ch.pipeline().addLast(this);   // before ServerBootstrap's acceptor, added when it binds
                }
                return ch;
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException("cannot create " + type.getName(), e);
            }
        };
    }

    /** Connections open now. */
    int open() {
        return open.get();
    }

    /** One line per {@link #LOG_EVERY_NANOS} at most: a flood of connections must not flood the log. */
    private void logRefusal(Channel child) {
        refused.incrementAndGet();
        long now = System.nanoTime();
        long due = nextLog.get();
        if (now - due >= 0 && nextLog.compareAndSet(due, now + LOG_EVERY_NANOS)) {
            long n = refused.getAndSet(0);
            LOG.warn("gRPC " + port + " connection from " + child.remoteAddress() + " refused: " + max
                    + " connections are open (grpc_max_connections)"
                    + (n > 1 ? "; " + n + " refused since the last such line" : ""));
        }
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        Channel child = (Channel) msg;
        if (open.incrementAndGet() > max) {
            open.decrementAndGet();
            logRefusal(child);
            child.unsafe().closeForcibly();
            return;
        }
        child.closeFuture().addListener(f -> open.decrementAndGet());
        ctx.fireChannelRead(child);
    }
}

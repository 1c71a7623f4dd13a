package org.tserve.http;

import io.netty.channel.Channel;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.util.concurrent.GlobalEventExecutor;
import java.util.concurrent.TimeUnit;

/**
 * The REST side of a graceful stop (SIGTERM). From {@link #start} on, every answer closes its
 * connection ({@code Connection: close}, then a lingering close) and a request that arrives is
 * answered 503 "Server is shutting down" the same way; the requests in flight are answered as
 * usual. At the end {@link #closeAll} closes the connections still open (idle keep-alive ones)
 * lingering too: output shut down first, what a client sends meanwhile read and dropped. Closed
 * at once, a connection whose client had just sent a request (unread in the server's socket)
 * would answer with a TCP reset, which the client reports as "connection reset by peer".
 */
final class ServerDrain {
    private final ChannelGroup open = new DefaultChannelGroup("rest-connections", GlobalEventExecutor.INSTANCE);
    private volatile boolean draining;

    /** Every accepted connection (a closed one leaves the group by itself). */
    void track(Channel ch) {
        open.add(ch);
    }

    /** Whether the server is stopping: answers close their connections. */
    boolean draining() {
        return draining;
    }

    void start() {
        draining = true;
    }

    /**
     * Closes every open connection lingering and waits until they are closed (at most the
     * lingering time and a margin).
     */
    void closeAll() {
        draining = true;
        for (Channel ch : open) {
            ch.eventLoop().execute(() -> LingeringClose.INSTANCE.operationComplete(ch.newSucceededFuture()));
        }
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(LingeringClose.LINGER_MS + 1000);
        while (!open.isEmpty() && System.nanoTime() < deadline) {
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }
}

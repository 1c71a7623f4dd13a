package org.tserve.util;

import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.util.concurrent.DefaultThreadFactory;
import org.apache.logging.log4j.Logger;

/**
 * The Netty transport every server socket uses: Linux's native epoll when {@code use_native_io}
 * is true (TorchServe's key and default) and its JNI library loads, else Java's NIO. Both the REST
 * connectors and the gRPC servers take their event loops and server channel class from here, so
 * one process never mixes the two.
 */
public final class NettyTransport {
    private static final Logger LOG = Logging.logger(NettyTransport.class);

    private final String name;
    private final boolean nativeIo;

    private NettyTransport(String name, boolean nativeIo) {
        this.name = name;
        this.nativeIo = nativeIo;
    }

    /** Epoll when asked for and available (the reason is logged when it is not), else NIO. */
    public static NettyTransport choose(boolean useNativeIo) {
        if (!useNativeIo) {
            return new NettyTransport("nio (use_native_io=false)", false);
        }
        if (Epoll.isAvailable()) {
            return new NettyTransport("epoll (native)", true);
        }
        Throwable why = Epoll.unavailabilityCause();
        return new NettyTransport("nio (epoll unavailable: " + (why == null ? "unknown" : why.getMessage()) + ")", false);
    }

    /** Logs the choice once, at start, with the component that made it. */
    public NettyTransport logFor(String component) {
        LOG.info(component + " Netty transport: " + name);
        return this;
    }

    /** True for epoll. */
    public boolean isNative() {
        return nativeIo;
    }

    /** What the start log says, e.g. {@code epoll (native)}. */
    public String description() {
        return name;
    }

    /** A group of {@code threads} event loops named {@code <prefix>-N}. */
    public EventLoopGroup newGroup(int threads, String prefix) {
        IoHandlerFactory io = nativeIo ? EpollIoHandler.newFactory() : NioIoHandler.newFactory();
        return new MultiThreadIoEventLoopGroup(threads, new DefaultThreadFactory(prefix), io);
    }

    /** The server socket channel class matching {@link #newGroup}'s loops. */
    public Class<? extends ServerChannel> serverChannel() {
        return nativeIo ? EpollServerSocketChannel.class : NioServerSocketChannel.class;
    }
}

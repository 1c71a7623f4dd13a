package org.tserve.grpc;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ServerChannel;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import java.util.ArrayList;
import java.util.List;
import org.junit.Test;

/** The cap in front of the acceptor, driven with embedded channels standing for accepted connections. */
public class ConnectionCapTest {
    private final List<Object> passed = new ArrayList<>();

    /** A server-side pipeline: the cap, then what stands for ServerBootstrap's acceptor. */
    private EmbeddedChannel acceptor(ConnectionCap cap) {
        EmbeddedChannel server = new EmbeddedChannel(cap);
        server.pipeline().addLast(new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                passed.add(msg);
            }
        });
        return server;
    }

    @Test
    public void connectionsOverTheCapAreClosedAndSlotsFreeOnClose() {
        ConnectionCap cap = new ConnectionCap("inference", 2);
        EmbeddedChannel server = acceptor(cap);
        Channel a = new EmbeddedChannel();
        Channel b = new EmbeddedChannel();
        Channel c = new EmbeddedChannel();
        server.writeInbound(a);
        server.writeInbound(b);
        server.writeInbound(c);
        assertEquals(List.of(a, b), passed);
        assertFalse("over the cap: closed", c.isOpen());
        assertTrue(a.isOpen() && b.isOpen());
        assertEquals(2, cap.open());
        a.close().syncUninterruptibly();
        assertEquals(1, cap.open());
        Channel d = new EmbeddedChannel();
        server.writeInbound(d);
        assertTrue(d.isOpen());
        assertEquals(List.of(a, b, d), passed);
        assertEquals(2, cap.open());
        server.finishAndReleaseAll();
    }

    @Test
    public void theFactoryAddsTheCapOnlyWhenThereIsOne() {
        ServerChannel capped = new ConnectionCap("inference", 1).channelFactory(NioServerSocketChannel.class).newChannel();
        ServerChannel open = new ConnectionCap("inference", 0).channelFactory(NioServerSocketChannel.class).newChannel();
        try {
            assertTrue(capped.pipeline().first() instanceof ConnectionCap);
            assertNull(open.pipeline().first());
        } finally {
            capped.unsafe().closeForcibly();
            open.unsafe().closeForcibly();
        }
    }
}

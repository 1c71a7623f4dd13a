package org.tserve.wlm.link;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.tserve.wlm.protocol.Codec;
import org.tserve.wlm.protocol.Frame;
import org.tserve.wlm.protocol.FrameType;

/** A rank socket's frames both ways, and the link's write order, PING sharing, idle wait and death. */
public class BackendLinkTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();
    private ServerSocketChannel server;
    private Path socket;

    private RankConnection open() throws Exception {
        socket = tmp.getRoot().toPath().resolve("rank.sock");
        server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        server.bind(UnixDomainSocketAddress.of(socket));
        return RankConnection.tryOpen(false, 0, socket);
    }

    @After
    public void close() throws Exception {
        if (server != null) {
            server.close();
        }
    }

    @Test
    public void nobodyListeningYetIsNull() throws Exception {
        assertNull(RankConnection.tryOpen(false, 0, tmp.getRoot().toPath().resolve("absent.sock")));
        Path stale = Files.createFile(tmp.getRoot().toPath().resolve("stale.sock"));   // refused: not listening
        assertNull(RankConnection.tryOpen(false, 0, stale));
    }

    @Test
    public void aSocketTheJdkCannotReachFailsAtOnce() throws Exception {
        // a worker (Python) can listen on a 107-byte path the JDK refuses: polling it would never succeed
        Path dir = Files.createDirectories(Path.of("/tmp", "rank-" + ProcessHandle.current().pid()));
        Path tooLong = dir.resolve("s".repeat(107 - dir.toString().length() - 1));
        Files.createFile(tooLong);
        try {
            RankConnection.tryOpen(false, 0, tooLong);
            fail("connected to a path the JDK refuses");
        } catch (IOException e) {
            assertTrue(e.getMessage(), e.getMessage().contains(tooLong.toString()) && e.getMessage().contains("too long"));
        } finally {
            Files.delete(tooLong);
            Files.delete(dir);
        }
    }

    @Test
    public void framesTravelBothWays() throws Exception {
        RankConnection c = open();
        try (SocketChannel peer = server.accept()) {
            c.write(FrameType.INFERENCE, 7, "hello".getBytes(StandardCharsets.UTF_8));
            Frame in = Codec.read(peer, 1 << 20);
            assertEquals(FrameType.INFERENCE, in.type);
            assertEquals(7, in.batchId);
            assertEquals("hello", in.text());
            Codec.write(peer, FrameType.RESULT, 7, new byte[] {1, 2, 3});
            Frame back = c.read(1 << 20);
            assertEquals(FrameType.RESULT, back.type);
            assertArrayEquals(new byte[] {1, 2, 3}, back.body);
        }
        c.close();
    }

    @Test
    public void concurrentPingsShareOneFrameAndAPongAnswersThem() throws Exception {
        BackendLink link = new BackendLink(new RankConnection[] {open()}, 2);
        try (SocketChannel peer = server.accept()) {
            CompletableFuture<String> a = link.ping();
            CompletableFuture<String> b = link.ping();
            assertSame(a, b);
            assertEquals(FrameType.PING, Codec.read(peer, 1 << 20).type);
            link.onPong("{\"stages\": []}");
            assertEquals("{\"stages\": []}", a.get());
            assertTrue("a new PING after the answer", link.ping() != a);
        }
    }

    @Test
    public void dyingAnswersWhatWaitsOnTheLinkAndKeepsTheFirstReason() throws Exception {
        BackendLink link = new BackendLink(new RankConnection[] {open()}, 1);
        server.accept().close();
        CompletableFuture<String> pong = link.ping();
        link.die("rank 0: worker closed the connection", 0);
        link.die("worker stopped");
        assertFalse(link.alive());
        assertEquals("rank 0: worker closed the connection", link.deadReason());
        assertEquals(0, link.deadRank());
        assertNull(pong.getNow("pending"));
        try {
            link.loadReplies.get(0).get();
            throw new AssertionError("the LOADED wait must fail");
        } catch (ExecutionException expected) {
            assertTrue(expected.getCause().getMessage().contains("worker closed the connection"));
        }
    }

    @Test
    public void awaitIdleReturnsOnceEveryPermitIsBack() throws Exception {
        BackendLink link = new BackendLink(new RankConnection[] {open()}, 2);
        link.permits.acquire();
        long deadline = System.currentTimeMillis() + 60_000;
        Thread answer = new Thread(() -> {
            try {
                Thread.sleep(50);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
            link.permits.release();
        });
        answer.start();
        link.awaitIdle(deadline);
        assertTrue(System.currentTimeMillis() < deadline);
        assertEquals(2, link.permits.availablePermits());
        answer.join();
    }
}

package org.tserve.wlm.link;

import java.io.IOException;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import org.tserve.wlm.protocol.Codec;
import org.tserve.wlm.protocol.Frame;

/**
 * One socket to one rank of a backend: frames out ({@link #write}) and in ({@link #read}), as
 * docs/protocol.md defines them. It knows nothing of models, batches or ranks' roles; callers that
 * write to several ranks serialise their writes themselves ({@link BackendLink}).
 */
public final class RankConnection {
    private final SocketChannel channel;

    private RankConnection(SocketChannel channel) {
        this.channel = channel;
    }

    /**
     * Connects to a rank listening on {@code socket} (a Unix socket) or on 127.0.0.1:{@code port}
     * when {@code tcp}; null while nobody listens there yet (no socket file, or refused).
     *
     * @throws IOException when the connection can never succeed (the JDK refusing the socket's path,
     *     no permission): the caller fails the worker now instead of polling until startupTimeout
     */
    public static RankConnection tryOpen(boolean tcp, int port, Path socket) throws IOException {
        if (!tcp && !Files.exists(socket)) {
            return null;
        }
        SocketChannel ch = null;
        try {
            if (tcp) {
                ch = SocketChannel.open();
                ch.connect(new InetSocketAddress("127.0.0.1", port));
            } else {
                ch = SocketChannel.open(StandardProtocolFamily.UNIX);
                ch.connect(UnixDomainSocketAddress.of(socket));
            }
            return new RankConnection(ch);
        } catch (ConnectException e) {
            closeQuietly(ch);
            return null;
        } catch (IOException e) {
            closeQuietly(ch);
            if (!tcp && !Files.exists(socket)) {
                return null;   // the file went between the check and the connect (a worker restarting)
            }
            throw new IOException("cannot connect to " + (tcp ? "127.0.0.1:" + port : socket) + ": " + e.getMessage(), e);
        }
    }

    /** Writes one frame; not thread-safe on its own (see the class comment). */
    void write(int type, long batchId, byte[] body) throws IOException {
        Codec.write(channel, type, batchId, body);
    }

    /** Blocks for the next frame; a frame longer than {@code maxLength} is refused with an IOException. */
    public Frame read(long maxLength) throws IOException {
        return Codec.read(channel, maxLength);
    }

    public void close() {
        closeQuietly(channel);
    }

    private static void closeQuietly(SocketChannel ch) {
        if (ch == null) {
            return;
        }
        try {
            ch.close();
        } catch (IOException ignored) {
            // already closed
        }
    }
}

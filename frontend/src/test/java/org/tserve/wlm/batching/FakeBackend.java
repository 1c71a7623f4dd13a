package org.tserve.wlm.batching;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingDeque;
import java.util.concurrent.LinkedBlockingDeque;
import org.tserve.config.ModelSettings;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.Response;
import org.tserve.wlm.link.BackendLink;
import org.tserve.wlm.link.RankConnection;
import org.tserve.wlm.protocol.Codec;
import org.tserve.wlm.protocol.Frame;
import org.tserve.wlm.protocol.Request;

/**
 * One rank's socket with the test in the backend's place: {@link #link} is what the code under test
 * writes to and reads from, {@link #read} and {@link #send} are the backend's side of it.
 */
final class FakeBackend implements AutoCloseable {
    final BackendLink link;
    private final ServerSocketChannel server;
    private final SocketChannel peer;

    private FakeBackend(BackendLink link, ServerSocketChannel server, SocketChannel peer) {
        this.link = link;
        this.server = server;
        this.peer = peer;
    }

    /** A link of one rank under {@code dir} carrying up to {@code inFlightLimit} batches. */
    static FakeBackend open(Path dir, int inFlightLimit) throws IOException {
        Path socket = dir.resolve("rank.sock");
        ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        server.bind(UnixDomainSocketAddress.of(socket));
        RankConnection c = RankConnection.tryOpen(false, 0, socket);
        SocketChannel peer = server.accept();
        return new FakeBackend(new BackendLink(new RankConnection[] {c}, inFlightLimit), server, peer);
    }

    /** The next frame the frontend wrote (blocks). */
    Frame read() throws IOException {
        return Codec.read(peer, 1 << 20);
    }

    /** The request ids of the next frame, which must be a batch. */
    List<String> readBatchIds(Frame f) throws IOException {
        List<String> ids = new ArrayList<>();
        for (Request r : Codec.decodeBatch(f.body)) {
            ids.add(r.requestId());
        }
        return ids;
    }

    void send(int type, long batchId, byte[] body) throws IOException {
        Codec.write(peer, type, batchId, body);
    }

    /** Sends {@code json} as a frame of {@code type} (ERROR, METRICS, LOADED, PONG). */
    void sendText(int type, long batchId, String json) throws IOException {
        send(type, batchId, json.getBytes(StandardCharsets.UTF_8));
    }

    /** A RESULT or CHUNK body answering {@code ids} with {@code text}. */
    static byte[] answers(String text, String... ids) {
        List<Response> out = new ArrayList<>();
        for (String id : ids) {
            out.add(new Response(id, 200, "", "text/plain", List.of(), text.getBytes(StandardCharsets.UTF_8)));
        }
        return Codec.encodeResponses(out);
    }

    /** The backend closes its socket. */
    void hangUp() throws IOException {
        peer.close();
    }

    @Override
    public void close() throws IOException {
        link.die("test over");
        peer.close();
        server.close();
    }

    /** A model version as batching sees it: its settings and its queue. */
    static final class Model implements BatchModel {
        final ModelSettings settings = new ModelSettings();
        final BlockingDeque<Job> queue = new LinkedBlockingDeque<>(100);
        boolean allRanks;

        @Override
        public String modelName() {
            return "m";
        }

        @Override
        public String modelVersion() {
            return "1.0";
        }

        @Override
        public ModelSettings getSettings() {
            return settings;
        }

        @Override
        public BlockingDeque<Job> jobQueue() {
            return queue;
        }

        @Override
        public boolean inferenceToAllRanks() {
            return allRanks;
        }
    }
}

package org.tserve.wlm;

import java.io.EOFException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.tserve.wlm.api.Header;
import org.tserve.wlm.api.Response;
import org.tserve.wlm.protocol.Codec;
import org.tserve.wlm.protocol.Frame;
import org.tserve.wlm.protocol.FrameType;
import org.tserve.wlm.protocol.Request;

/**
 * A stand-in backend speaking docs/protocol.md, launched by the real WorkerThread through a
 * script posing as the python interpreter. Modes: {@code pipeline} holds INFERENCE frames until
 * two are outstanding and answers them in reverse order; {@code stream} answers with two CHUNKs
 * and a RESULT; {@code die} exits with status 3 on the first INFERENCE.
 */
public final class FakeWorker {
    private FakeWorker() {
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        String sock = null;
        for (int i = 1; i < args.length - 1; i++) {
            if (args[i].equals("--sock-name")) {
                sock = args[i + 1];
            }
        }
        Path p = Path.of(sock);
        Files.deleteIfExists(p);
        ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        server.bind(UnixDomainSocketAddress.of(p));
        System.out.println("[PID]" + ProcessHandle.current().pid());
        System.out.println("Torch worker started.");
        System.out.flush();
        SocketChannel ch = server.accept();
        List<Frame> held = new ArrayList<>();
        try {
            while (true) {
                Frame f = Codec.read(ch, 1 << 30);
                if (f.type == FrameType.LOAD) {
                    String ok = "{\"status\":200,\"message\":\"loaded\",\"pid\":" + ProcessHandle.current().pid() + "}";
                    Codec.write(ch, FrameType.LOADED, f.batchId, ok.getBytes(StandardCharsets.UTF_8));
                } else if (f.type == FrameType.STOP) {
                    System.exit(0);
                } else if (f.type == FrameType.INFERENCE) {
                    if (mode.equals("die")) {
                        System.err.println("fake worker dies on purpose");
                        System.exit(3);
                    }
                    if (mode.equals("stream")) {
                        for (String piece : new String[] {"a", "b"}) {
                            Codec.write(ch, FrameType.CHUNK, f.batchId, answer(f, piece));
                        }
                        Codec.write(ch, FrameType.RESULT, f.batchId, answer(f, "c"));
                        continue;
                    }
                    held.add(f);
                    if (held.size() == 2) {
                        for (int i = held.size() - 1; i >= 0; i--) {
                            Frame h = held.get(i);
                            Codec.write(ch, FrameType.RESULT, h.batchId, answer(h, null));
                        }
                        held.clear();
                    }
                }
            }
        } catch (EOFException e) {
            System.exit(0);
        }
    }

    /** One response per request: the batch id and the request's body (or a fixed piece). */
    private static byte[] answer(Frame f, String piece) throws Exception {
        List<Response> out = new ArrayList<>();
        for (Request r : Codec.decodeBatch(f.body)) {
            String input = new String(r.parts().get(0).value(), StandardCharsets.UTF_8);
            String text = piece != null ? piece : "batch " + f.batchId + ": " + input;
            out.add(new Response(r.requestId(), 200, "", "text/plain", List.of(new Header("x-batch", String.valueOf(f.batchId))),
                    text.getBytes(StandardCharsets.UTF_8)));
        }
        return Codec.encodeResponses(out);
    }
}

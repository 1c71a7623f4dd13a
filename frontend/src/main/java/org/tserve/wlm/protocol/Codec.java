package org.tserve.wlm.protocol;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.GatheringByteChannel;
import java.nio.channels.ReadableByteChannel;
import java.nio.channels.WritableByteChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.tserve.wlm.api.Header;
import org.tserve.wlm.api.Part;
import org.tserve.wlm.api.Response;

/**
 * The frontend side of docs/protocol.md: frames are {@code length:u32 type:u8 batch_id:u32 body},
 * all integers unsigned big-endian; strings and bytes are {@code len:u32} + data.
 */
public final class Codec {
    private static final int HEADER = 9;
    /** Frame bodies up to this size are allocated at once; a larger one grows as it arrives. */
    static final int ALLOCATE_AHEAD = 1 << 20;

    private Codec() {
    }

    // ---- frames ----

    /** Encodes a whole frame (length prefix included). */
    public static byte[] encodeFrame(int type, long batchId, byte[] body) {
        ByteBuffer b = ByteBuffer.allocate(HEADER + body.length);
        b.putInt(5 + body.length);
        b.put((byte) type);
        b.putInt((int) batchId);
        b.put(body);
        return b.array();
    }

    /**
     * Writes one frame fully: header and body in one gathering write where the channel can
     * (no copy of the body into a frame array).
     */
    public static void write(WritableByteChannel ch, int type, long batchId, byte[] body) throws IOException {
        if (!(ch instanceof GatheringByteChannel)) {
            ByteBuffer b = ByteBuffer.wrap(encodeFrame(type, batchId, body));
            while (b.hasRemaining()) {
                ch.write(b);
            }
            return;
        }
        ByteBuffer head = ByteBuffer.allocate(HEADER);
        head.putInt(5 + body.length);
        head.put((byte) type);
        head.putInt((int) batchId);
        head.flip();
        ByteBuffer[] bufs = {head, ByteBuffer.wrap(body)};
        GatheringByteChannel g = (GatheringByteChannel) ch;
        while (bufs[1].hasRemaining() || head.hasRemaining()) {
            g.write(bufs);
        }
    }

    /**
     * Reads one frame; EOFException when the peer closed the connection between frames,
     * ProtocolException for a frame longer than {@code maxLength} body bytes or a truncated one.
     */
    public static Frame read(ReadableByteChannel ch, long maxLength) throws IOException {
        ByteBuffer head = ByteBuffer.allocate(HEADER);
        if (!readFully(ch, head, true)) {
            throw new EOFException("connection closed");
        }
        head.flip();
        long length = Integer.toUnsignedLong(head.getInt());
        int type = head.get() & 0xff;
        long batchId = Integer.toUnsignedLong(head.getInt());
        if (length < 5) {
            throw new ProtocolException("frame length " + length + " is shorter than its header");
        }
        if (length - 5 > maxLength) {
            throw new ProtocolException("frame of " + (length - 5) + " bytes exceeds the limit of " + maxLength
                    + " bytes (max_response_size)");
        }
        return new Frame(type, batchId, readBody(ch, (int) (length - 5)));
    }

    /**
     * {@code n} body bytes. Up to {@link #ALLOCATE_AHEAD} the buffer is allocated as declared;
     * past that it doubles as the bytes arrive, so a length field that is not followed by its
     * bytes costs at most twice what did arrive, never the declared size.
     */
    private static byte[] readBody(ReadableByteChannel ch, int n) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(Math.min(n, ALLOCATE_AHEAD));
        while (true) {
            readFully(ch, b, false);   // EOF inside a frame: ProtocolException
            if (b.capacity() == n) {
                return b.array();
            }
            ByteBuffer bigger = ByteBuffer.allocate((int) Math.min(n, 2L * b.capacity()));
            b.flip();
            bigger.put(b);
            b = bigger;
        }
    }

    /** Decodes a frame from a byte array holding exactly one frame (used by the vector tests). */
    public static Frame decodeFrame(byte[] bytes) throws ProtocolException {
        if (bytes.length < HEADER) {
            throw new ProtocolException("frame shorter than its header");
        }
        ByteBuffer b = ByteBuffer.wrap(bytes);
        long length = Integer.toUnsignedLong(b.getInt());
        if (length != bytes.length - 4) {
            throw new ProtocolException("frame length " + length + " does not match " + (bytes.length - 4) + " bytes");
        }
        int type = b.get() & 0xff;
        long batchId = Integer.toUnsignedLong(b.getInt());
        byte[] body = new byte[b.remaining()];
        b.get(body);
        return new Frame(type, batchId, body);
    }

    private static boolean readFully(ReadableByteChannel ch, ByteBuffer b, boolean eofAllowedAtStart) throws IOException {
        while (b.hasRemaining()) {
            int n = ch.read(b);
            if (n < 0) {
                if (eofAllowedAtStart && b.position() == 0) {
                    return false;
                }
                throw new ProtocolException("connection closed inside a frame");
            }
        }
        return true;
    }

    // ---- bodies ----

    /** Encodes an INFERENCE body: count, then per request id, headers and parts. */
    public static byte[] encodeBatch(List<Request> requests) {
        Writer w = new Writer(sizeHint(requests));
        w.u32(requests.size());
        for (Request r : requests) {
            w.str(r.requestId());
            w.u32(r.headers().size());
            for (Header h : r.headers()) {
                w.str(h.name());
                w.str(h.value());
            }
            w.u32(r.parts().size());
            for (Part p : r.parts()) {
                w.str(p.name());
                w.str(p.contentType() == null ? "" : p.contentType());
                w.bytes(p.value());
            }
        }
        return w.toByteArray();
    }

    /** Decodes an INFERENCE body (the worker's side; used by tests). */
    public static List<Request> decodeBatch(byte[] body) throws ProtocolException {
        Reader r = new Reader(body);
        long count = r.u32();
        List<Request> out = new ArrayList<>();
        for (long i = 0; i < count; i++) {
            String id = r.str();
            long hc = r.u32();
            List<Header> headers = new ArrayList<>();
            for (long j = 0; j < hc; j++) {
                headers.add(new Header(r.str(), r.str()));
            }
            long pc = r.u32();
            List<Part> parts = new ArrayList<>();
            for (long j = 0; j < pc; j++) {
                parts.add(new Part(r.str(), r.str(), r.bytes()));
            }
            out.add(new Request(id, headers, parts));
        }
        r.end();
        return out;
    }

    /** Decodes a RESULT or CHUNK body. */
    public static List<Response> decodeResponses(byte[] body) throws ProtocolException {
        Reader r = new Reader(body);
        long count = r.u32();
        List<Response> out = new ArrayList<>();
        for (long i = 0; i < count; i++) {
            String id = r.str();
            int status = (int) r.u32();
            String message = r.str();
            String ct = r.str();
            long hc = r.u32();
            List<Header> headers = new ArrayList<>();
            for (long j = 0; j < hc; j++) {
                headers.add(new Header(r.str(), r.str()));
            }
            byte[] b = r.bytes();
            out.add(new Response(id, status, message, ct, Collections.unmodifiableList(headers), b));
        }
        r.end();
        return out;
    }

    /** Encodes a RESULT or CHUNK body (the worker's side; used by tests). */
    public static byte[] encodeResponses(List<Response> responses) {
        Writer w = new Writer();
        w.u32(responses.size());
        for (Response r : responses) {
            w.str(r.requestId());
            w.u32(r.status());
            w.str(r.message() == null ? "" : r.message());
            w.str(r.contentType() == null ? "" : r.contentType());
            w.u32(r.headers().size());
            for (Header h : r.headers()) {
                w.str(h.name());
                w.str(h.value());
            }
            w.bytes(r.body());
        }
        return w.toByteArray();
    }

    /** An upper estimate of an INFERENCE body's size (ASCII-sized strings: the usual case), so it is written without regrowing. */
    /** About the size of {@link #encodeBatch}'s body for {@code requests} (exact for ASCII text). */
    public static int sizeHint(List<Request> requests) {
        long n = 4;
        for (Request r : requests) {
            n += 12 + r.requestId().length();
            for (Header h : r.headers()) {
                n += 8 + h.name().length() + h.value().length();
            }
            for (Part p : r.parts()) {
                n += 12 + p.name().length() + (p.contentType() == null ? 0 : p.contentType().length()) + p.value().length;
            }
        }
        return (int) Math.min(n, Integer.MAX_VALUE - 16);
    }

    /** Growable big-endian writer. */
    static final class Writer {
        private ByteBuffer buf;

        Writer() {
            this(256);
        }

        Writer(int capacity) {
            buf = ByteBuffer.allocate(Math.max(capacity, 16));
        }

        private void ensure(int n) {
            if (buf.remaining() < n) {
                ByteBuffer nb = ByteBuffer.allocate(Math.max(buf.capacity() * 2, buf.position() + n));
                buf.flip();
                nb.put(buf);
                buf = nb;
            }
        }

        void u32(long v) {
            ensure(4);
            buf.putInt((int) v);
        }

        void bytes(byte[] b) {
            u32(b.length);
            ensure(b.length);
            buf.put(b);
        }

        void str(String s) {
            bytes(s.getBytes(StandardCharsets.UTF_8));
        }

        byte[] toByteArray() {
            if (buf.position() == buf.capacity()) {
                return buf.array();   // sized exactly: no copy
            }
            byte[] out = new byte[buf.position()];
            buf.flip();
            buf.get(out);
            return out;
        }
    }

    /** Bounds-checked big-endian reader. */
    static final class Reader {
        private final ByteBuffer buf;

        Reader(byte[] b) {
            buf = ByteBuffer.wrap(b);
        }

        long u32() throws ProtocolException {
            if (buf.remaining() < 4) {
                throw new ProtocolException("body truncated: expected a u32 at offset " + buf.position());
            }
            return Integer.toUnsignedLong(buf.getInt());
        }

        byte[] bytes() throws ProtocolException {
            long n = u32();
            if (n > buf.remaining()) {
                throw new ProtocolException("body truncated: field of " + n + " bytes at offset " + buf.position()
                        + " but only " + buf.remaining() + " remain");
            }
            byte[] b = new byte[(int) n];
            buf.get(b);
            return b;
        }

        String str() throws ProtocolException {
            return new String(bytes(), StandardCharsets.UTF_8);
        }

        void end() throws ProtocolException {
            if (buf.hasRemaining()) {
                throw new ProtocolException(buf.remaining() + " unexpected bytes after the body");
            }
        }
    }
}

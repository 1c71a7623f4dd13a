package org.tserve.http;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.TooLongHttpHeaderException;
import io.netty.handler.codec.http.TooLongHttpLineException;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.zip.Deflater;
import java.util.zip.DeflaterOutputStream;
import java.util.zip.GZIPOutputStream;
import org.junit.Test;

/** The REST pipeline's codec, decompressor and aggregator on raw bytes, as HttpServer builds it. */
public class RequestDecompressorTest {
    private static final int LIMIT = 1000;

    private static EmbeddedChannel pipeline() {
        return new EmbeddedChannel(new HttpServerCodec(HttpServer.decoderConfig()), new RequestDecompressor(LIMIT),
                new SizeLimitedAggregator(LIMIT));
    }

    private static byte[] gzip(byte[] data) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (GZIPOutputStream z = new GZIPOutputStream(out)) {
            z.write(data);
        }
        return out.toByteArray();
    }

    private static byte[] deflate(byte[] data, boolean zlibWrapped) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (DeflaterOutputStream z = new DeflaterOutputStream(out, new Deflater(6, !zlibWrapped))) {
            z.write(data);
        }
        return out.toByteArray();
    }

    private static ByteBuf post(String encoding, byte[] body) {
        String head = "POST /predictions/m HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + (encoding == null ? "" : "Content-Encoding: " + encoding + "\r\n")
                + "Content-Length: " + body.length + "\r\n\r\n";
        return Unpooled.wrappedBuffer(head.getBytes(StandardCharsets.US_ASCII), body);
    }

    /** What the server wrote back, as text. */
    private static String answer(EmbeddedChannel ch) {
        StringBuilder sb = new StringBuilder();
        for (Object o; (o = ch.readOutbound()) != null; ) {
            ByteBuf b = (ByteBuf) o;
            sb.append(b.toString(StandardCharsets.UTF_8));
            b.release();
        }
        return sb.toString();
    }

    private static FullHttpRequest passed(EmbeddedChannel ch, ByteBuf request) {
        ch.writeInbound(request);
        FullHttpRequest req = ch.readInbound();
        assertTrue("no request came through; answer: " + answer(ch), req != null);
        return req;
    }

    @Test
    public void gzipAndDeflateBodiesArriveDecompressed() throws Exception {
        byte[] json = "{\"data\": \"hello, compressed world\"}".getBytes(StandardCharsets.UTF_8);
        byte[][] bodies = {gzip(json), gzip(json), deflate(json, true), deflate(json, false)};
        String[] encodings = {"gzip", "X-GZIP", "deflate", "deflate"};
        for (int i = 0; i < bodies.length; i++) {
            EmbeddedChannel ch = pipeline();
            FullHttpRequest req = passed(ch, post(encodings[i], bodies[i]));
            assertEquals(encodings[i], new String(json, StandardCharsets.UTF_8), req.content().toString(StandardCharsets.UTF_8));
            assertNull(req.headers().get(HttpHeaderNames.CONTENT_ENCODING));
            assertEquals(String.valueOf(json.length), req.headers().get(HttpHeaderNames.CONTENT_LENGTH));
            assertNull(req.headers().get(HttpHeaderNames.TRANSFER_ENCODING));
            req.release();
            assertTrue(ch.isActive());
            ch.finishAndReleaseAll();
        }
    }

    @Test
    public void plainAndIdentityBodiesAndEmptyCompressedBodiesPassUnchanged() {
        for (String encoding : new String[] {null, "identity", "gzip"}) {
            EmbeddedChannel ch = pipeline();
            byte[] body = encoding == null || encoding.equals("identity") ? "abc".getBytes(StandardCharsets.UTF_8) : new byte[0];
            FullHttpRequest req = passed(ch, post(encoding, body));
            assertEquals(new String(body, StandardCharsets.UTF_8), req.content().toString(StandardCharsets.UTF_8));
            req.release();
            ch.finishAndReleaseAll();
        }
    }

    /** Fed a bomb, the channel answers 413 and closes; what got through is nothing. */
    private static void assertRejected(EmbeddedChannel ch, ByteBuf request, String status, String named) {
        ch.writeInbound(request);
        assertNull(ch.readInbound());
        String answer = answer(ch);
        assertTrue(answer, answer.startsWith("HTTP/1.1 " + status));
        assertTrue(answer, answer.contains(named));
        assertTrue(answer, answer.toLowerCase().contains("connection: close"));
        assertFalse(ch.isActive());
        ch.finishAndReleaseAll();
    }

    @Test
    public void decompressedSizeIsCappedByMaxRequestSize() throws Exception {
        // 10 MB of zeros is ~10 KB of gzip: under the limit compressed, 10000 times over it decompressed
        byte[] bomb = gzip(new byte[10 << 20]);
        assertTrue(bomb.length > LIMIT);
        assertRejected(pipeline(), post("gzip", Arrays.copyOf(bomb, bomb.length)), "413", "max_request_size");
        // a small one (1001 zeros in ~30 bytes) is caught by the aggregator's count
        assertRejected(pipeline(), post("gzip", gzip(new byte[LIMIT + 1])), "413", "max_request_size");
        byte[] ok = gzip(new byte[LIMIT]);
        FullHttpRequest req = passed(pipeline(), post("gzip", ok));
        assertEquals(LIMIT, req.content().readableBytes());
        req.release();
    }

    @Test
    public void aBombSentInPiecesIsCutWithoutAllocatingIt() throws Exception {
        byte[] bomb = gzip(new byte[100 << 20]);   // ~100 KB
        EmbeddedChannel ch = pipeline();
        String head = "POST /p HTTP/1.1\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n";
        ch.writeInbound(Unpooled.copiedBuffer(head, StandardCharsets.US_ASCII));
        for (int off = 0; off < bomb.length && ch.isActive(); off += 4096) {
            int n = Math.min(4096, bomb.length - off);
            ch.writeInbound(Unpooled.wrappedBuffer(Integer.toHexString(n).getBytes(StandardCharsets.US_ASCII),
                    "\r\n".getBytes(StandardCharsets.US_ASCII), Arrays.copyOfRange(bomb, off, off + n),
                    "\r\n".getBytes(StandardCharsets.US_ASCII)));
        }
        assertNull(ch.readInbound());
        String answer = answer(ch);
        assertTrue(answer, answer.startsWith("HTTP/1.1 413") && answer.contains("max_request_size"));
        assertFalse(ch.isActive());
        ch.finishAndReleaseAll();
    }

    @Test
    public void aCompressedContentLengthAboveTheLimitIsRefusedBeforeTheBody() {
        EmbeddedChannel ch = pipeline();
        ch.writeInbound(Unpooled.copiedBuffer("POST /p HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 5000\r\n"
                + "Expect: 100-continue\r\n\r\n", StandardCharsets.US_ASCII));
        String answer = answer(ch);
        assertTrue(answer, answer.startsWith("HTTP/1.1 413") && !answer.contains("100 Continue"));
        ch.finishAndReleaseAll();
    }

    @Test
    public void corruptTruncatedOrTrailedGzipIs400() throws Exception {
        byte[] good = gzip("some text to compress".getBytes(StandardCharsets.UTF_8));
        byte[] flipped = good.clone();
        flipped[12] ^= 0x55;
        byte[] badCrc = good.clone();
        badCrc[good.length - 6] ^= 1;
        byte[] twice = new byte[good.length * 2];
        System.arraycopy(good, 0, twice, 0, good.length);
        System.arraycopy(good, 0, twice, good.length, good.length);
        byte[][] bodies = {"not gzip at all".getBytes(StandardCharsets.UTF_8), flipped, badCrc,
            Arrays.copyOf(good, good.length - 8), Arrays.copyOf(good, 15), twice};
        String[] named = {"GZIP format", "Cannot decompress", "CRC", "ends early", "ends early", "follow the end"};
        for (int i = 0; i < bodies.length; i++) {
            assertRejected(pipeline(), post("gzip", bodies[i]), "400", named[i]);
        }
        assertRejected(pipeline(), post("deflate", "\u0078\u009cnot deflate".getBytes(StandardCharsets.ISO_8859_1)),
                "400", "Cannot decompress");
    }

    @Test
    public void aCorruptBodyNamesTheEncodingItWasSentWithAndTheFix() {
        // HttpContentDecoder drops the Content-Encoding header before the body: the message once said "null"
        for (String encoding : new String[] {"gzip", "x-gzip", "deflate"}) {
            EmbeddedChannel ch = pipeline();
            ch.writeInbound(post(encoding, "not compressed at all".getBytes(StandardCharsets.UTF_8)));
            String answer = answer(ch);
            assertTrue(answer, answer.startsWith("HTTP/1.1 400"));
            assertTrue(answer, answer.contains("(Content-Encoding \\\"" + encoding + "\\\")"));
            assertFalse(answer, answer.contains("null"));
            assertTrue(answer, answer.contains("send it uncompressed without the Content-Encoding header"));
            ch.finishAndReleaseAll();
        }
    }

    @Test
    public void unknownEncodingsAre415NamingTheSupportedOnes() {
        for (String encoding : new String[] {"br", "zstd", "snappy", "compress", "gzip, deflate"}) {
            assertRejected(pipeline(), post(encoding, new byte[] {1, 2, 3}), "415", "gzip, deflate");
        }
    }

    @Test
    public void tooLongHeadersAndRequestLinesAre431And414NamingTheLimit() {
        char[] big = new char[HttpServer.MAX_HEADER_SIZE];
        Arrays.fill(big, 'a');
        EmbeddedChannel ch = pipeline();
        FullHttpRequest req = passed(ch, Unpooled.copiedBuffer("GET /ping HTTP/1.1\r\nX-Big: " + new String(big)
                + "\r\n\r\n", StandardCharsets.US_ASCII));
        assertTrue(req.decoderResult().cause() instanceof TooLongHttpHeaderException);
        HttpError e = HttpError.undecodable(req.decoderResult().cause());
        assertEquals(431, e.getStatus());
        assertTrue(e.getMessage(), e.getMessage().contains(String.valueOf(HttpServer.MAX_HEADER_SIZE)));
        req.release();
        ch.finishAndReleaseAll();

        char[] longUri = new char[HttpServer.MAX_REQUEST_LINE];
        Arrays.fill(longUri, 'u');
        ch = pipeline();
        req = passed(ch, Unpooled.copiedBuffer("GET /" + new String(longUri) + " HTTP/1.1\r\n\r\n", StandardCharsets.US_ASCII));
        assertTrue(req.decoderResult().cause() instanceof TooLongHttpLineException);
        e = HttpError.undecodable(req.decoderResult().cause());
        assertEquals(414, e.getStatus());
        assertTrue(e.getMessage(), e.getMessage().contains(String.valueOf(HttpServer.MAX_REQUEST_LINE)));
        req.release();
        ch.finishAndReleaseAll();
    }
}

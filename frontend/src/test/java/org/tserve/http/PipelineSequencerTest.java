package org.tserve.http;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.DefaultHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.Test;

/** Pipelined requests are answered in request order, streamed answers included (issue 27). */
public class PipelineSequencerTest {
    /** Keeps the requests it gets; the test answers them when it likes. */
    private static final class Recorder extends SimpleChannelInboundHandler<FullHttpRequest> {
        final List<String> uris = new ArrayList<>();
        ChannelHandlerContext ctx;

        @Override
        protected void channelRead0(ChannelHandlerContext c, FullHttpRequest req) {
            ctx = c;
            uris.add(req.uri());
        }

        void answer(String text) {
            DefaultFullHttpResponse r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK,
                    Unpooled.copiedBuffer(text, StandardCharsets.UTF_8));
            HttpUtil.setContentLength(r, r.content().readableBytes());
            ctx.writeAndFlush(r);
        }
    }

    private static EmbeddedChannel channel(Recorder rec, long maxHeldBytes) {
        return new EmbeddedChannel(new HttpServerCodec(HttpServer.decoderConfig(), PipelineSequencer.CODEC_DEPTH),
                new PipelineSequencer(maxHeldBytes), new TransferCodings(), new HttpObjectAggregator(1 << 20), rec);
    }

    private static ByteBuf bytes(String s) {
        return Unpooled.copiedBuffer(s, StandardCharsets.UTF_8);
    }

    private static String written(EmbeddedChannel ch) {
        StringBuilder sb = new StringBuilder();
        ByteBuf b;
        while ((b = ch.readOutbound()) != null) {
            sb.append(b.toString(StandardCharsets.UTF_8));
            b.release();
        }
        return sb.toString();
    }

    @Test
    public void aLaterRequestWaitsUntilTheAnswerBeforeItIsWritten() {
        Recorder rec = new Recorder();
        EmbeddedChannel ch = channel(rec, 1 << 20);
        ch.writeInbound(bytes("POST /slow HTTP/1.1\r\nContent-Length: 1\r\n\r\nx"
                + "GET /fast HTTP/1.1\r\n\r\nGET /third HTTP/1.1\r\n\r\n"));
        assertEquals(List.of("/slow"), rec.uris);   // before the fix all three were handed on at once
        rec.answer("slow");
        ch.runPendingTasks();
        assertEquals(List.of("/slow", "/fast"), rec.uris);
        rec.answer("fast");
        ch.runPendingTasks();
        rec.answer("third");
        ch.runPendingTasks();
        String out = written(ch);
        assertTrue(out, out.indexOf("slow") < out.indexOf("fast") && out.indexOf("fast") < out.indexOf("third"));
        assertTrue(ch.config().isAutoRead());
        ch.finishAndReleaseAll();
    }

    @Test
    public void aStreamedAnswerEndsBeforeTheNextRequestIsHandedOn() {
        Recorder rec = new Recorder();
        EmbeddedChannel ch = channel(rec, 1 << 20);
        ch.writeInbound(bytes("GET /stream HTTP/1.1\r\n\r\nGET /next HTTP/1.1\r\n\r\n"));
        DefaultHttpResponse head = new DefaultHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK);
        HttpUtil.setTransferEncodingChunked(head, true);
        rec.ctx.writeAndFlush(head);
        // a 100 Continue is no answer either
        rec.ctx.writeAndFlush(new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.CONTINUE));
        rec.ctx.writeAndFlush(new DefaultHttpContent(bytes("part")));
        ch.runPendingTasks();
        assertEquals(List.of("/stream"), rec.uris);
        rec.ctx.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT);
        ch.runPendingTasks();
        assertEquals(List.of("/stream", "/next"), rec.uris);
        ch.finishAndReleaseAll();
    }

    @Test
    public void heldBodiesAboveTheBoundStopReading() {
        Recorder rec = new Recorder();
        EmbeddedChannel ch = channel(rec, 10);
        ch.writeInbound(bytes("GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 20\r\n\r\n"
                + "01234567890123456789"));
        assertFalse(ch.config().isAutoRead());
        rec.answer("a");
        ch.runPendingTasks();
        assertEquals(List.of("/a", "/b"), rec.uris);
        assertTrue(ch.config().isAutoRead());
        ch.finishAndReleaseAll();
    }

    @Test
    public void pastTheHeldCountTheRestIsDroppedAndTheConnectionClosesAfterTheHeldAnswers() {
        Recorder rec = new Recorder();
        EmbeddedChannel ch = channel(rec, 1 << 20);
        StringBuilder many = new StringBuilder();
        for (int i = 0; i <= PipelineSequencer.MAX_HELD + 5; i++) {
            many.append("GET /r").append(i).append(" HTTP/1.1\r\n\r\n");
        }
        ch.writeInbound(bytes(many.toString()));
        for (int i = 0; i <= PipelineSequencer.MAX_HELD; i++) {
            assertTrue(ch.isActive());
            rec.answer("r" + i);
            ch.runPendingTasks();
        }
        assertEquals(PipelineSequencer.MAX_HELD + 1, rec.uris.size());
        assertFalse(ch.isActive());
        ch.finishAndReleaseAll();
    }

    @Test
    public void nothingIsHandedOnAfterAnAnswerThatClosesTheConnection() {
        Recorder rec = new Recorder();
        EmbeddedChannel ch = channel(rec, 1 << 20);
        ch.writeInbound(bytes("GET /last HTTP/1.1\r\nConnection: close\r\n\r\nPOST /after HTTP/1.1\r\n"
                + "Content-Length: 3\r\n\r\nabc"));
        DefaultFullHttpResponse r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK);
        r.headers().set(HttpHeaderNames.CONNECTION, "close");
        HttpUtil.setContentLength(r, 0);
        rec.ctx.writeAndFlush(r);
        ch.runPendingTasks();
        ch.writeInbound(bytes("GET /later HTTP/1.1\r\n\r\n"));
        ch.runPendingTasks();
        assertEquals(List.of("/last"), rec.uris);   // the prediction after it would run for nobody
        ch.finishAndReleaseAll();
    }

    @Test
    public void unknownTransferCodingsGet501AndClose() {
        Recorder rec = new Recorder();
        EmbeddedChannel ch = channel(rec, 1 << 20);
        ch.writeInbound(bytes("POST /a HTTP/1.1\r\nTransfer-Encoding: identity, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
                + "GET /smuggled HTTP/1.1\r\n\r\n"));
        ch.runPendingTasks();
        String out = written(ch);
        assertTrue(out, out.startsWith("HTTP/1.1 501"));
        assertTrue(out, out.toLowerCase(java.util.Locale.ROOT).contains(HttpHeaderNames.CONNECTION + ": close"));
        assertTrue(out, out.contains("identity"));
        assertTrue(rec.uris.isEmpty());
        assertFalse(ch.isActive());
        ch.finishAndReleaseAll();
    }

    @Test
    public void chunkedTwiceIs400() {
        assertEquals(400, TransferCodings.check(List.of("chunked", "chunked")).getStatus());
        assertEquals(501, TransferCodings.check(List.of("gzip, chunked")).getStatus());
        assertEquals(null, TransferCodings.check(List.of("Chunked")));
        assertEquals(null, TransferCodings.check(List.of()));
    }
}

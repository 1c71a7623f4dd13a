package org.tserve.http;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.DecoderException;
import io.netty.handler.codec.compression.DecompressionException;
import io.netty.handler.codec.compression.JdkZlibDecoder;
import io.netty.handler.codec.compression.ZlibWrapper;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpContentDecoder;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMessage;
import io.netty.handler.codec.http.HttpObject;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import java.util.List;
import java.util.Locale;
import org.tserve.util.LogText;

/**
 * Decompresses {@code Content-Encoding: gzip} / {@code deflate} request bodies as they stream in,
 * ahead of the aggregator, so that max_request_size caps the decompressed size (a gzip bomb is a
 * 413, never a heap full of zeros). Netty's {@link HttpContentDecoder} does the streaming and the
 * header rewrite (no Content-Encoding, the aggregator sets the decompressed Content-Length).
 * Netty's HttpContentDecompressor is not used as is: it passes a cut gzip stream on as if it were
 * whole and any other encoding through still compressed, where tserve answers 400 / 415.
 * Any error answers and closes the connection: the rest of the body is unread.
 */
final class RequestDecompressor extends HttpContentDecoder {
    static final String SUPPORTED = "gzip, deflate (or x-gzip, x-deflate, identity)";
    private final int limit;
    /** The current body's inflater (null when the body is not compressed). */
    private BodyInflater inflater;
    private HttpMessage request;
    /** The request's Content-Encoding as sent: HttpContentDecoder removes the header before the body. */
    private String encoding;
    private boolean failed;

    RequestDecompressor(int maxRequestSize) {
        this.limit = maxRequestSize;
    }

    @Override
    protected void decode(ChannelHandlerContext ctx, HttpObject msg, List<Object> out) throws Exception {
        if (failed) {
            return;   // the connection is closing; the message is released by MessageToMessageDecoder
        }
        if (msg instanceof HttpRequest) {
            request = (HttpMessage) msg;
            inflater = null;
            encoding = request.headers().get(HttpHeaderNames.CONTENT_ENCODING);
            if (encoding != null && wrapper(encoding) == null
                    && !HttpHeaderValues.IDENTITY.contentEqualsIgnoreCase(encoding.trim())) {
                fail(ctx, EarlyErrors.error(HttpResponseStatus.UNSUPPORTED_MEDIA_TYPE, "UnsupportedMediaTypeException",
                        "Content-Encoding " + LogText.quote(encoding) + " is not supported; send the body uncompressed "
                                + "or as one of: " + SUPPORTED));
                return;
            }
            // a compressed Content-Length above the limit would decompress above it too: answered
            // before the body is read (also instead of a 100 Continue), as without compression
            if (encoding != null && HttpUtil.getContentLength(request, -1L) > limit) {
                fail(ctx, EarlyErrors.tooLarge(limit));
                return;
            }
        }
        try {
            super.decode(ctx, msg, out);
        } catch (DecoderException e) {
            boolean tooLarge = inflater != null && inflater.exhausted;
            fail(ctx, tooLarge ? EarlyErrors.tooLarge(limit) : EarlyErrors.error(HttpResponseStatus.BAD_REQUEST,
                    "BadRequestException", cannotDecompress(encoding,
                            e instanceof DecompressionException ? e.getMessage() : String.valueOf(e.getCause()))));
        }
    }

    /** The 400's message: the encoding the client declared, what is wrong, and what to send instead. */
    static String cannotDecompress(String encoding, String problem) {
        return "Cannot decompress the request body (Content-Encoding " + LogText.quote(encoding) + "): " + problem
                + "; send the whole body compressed as one " + encoding.trim().toLowerCase(Locale.ROOT)
                + " stream, or send it uncompressed without the Content-Encoding header";
    }

    private void fail(ChannelHandlerContext ctx, FullHttpResponse resp) {
        failed = true;
        if (inflater != null) {
            inflater.abandoned = true;   // no second error when Netty cleans it up at close
        }
        // Mid-body, the aggregator holds the request's start: dropped now, it raises no
        // PrematureChannelClosureException (a logged "error") when the connection closes.
        SizeLimitedAggregator aggregator = ctx.pipeline().get(SizeLimitedAggregator.class);
        if (aggregator != null) {
            ctx.pipeline().remove(aggregator);
        }
        EarlyErrors.sendAndClose(ctx, request, resp);
    }

    /** The zlib framing of a supported encoding; null for identity or an unsupported one. */
    static ZlibWrapper wrapper(String encoding) {
        switch (encoding.trim().toLowerCase(Locale.ROOT)) {
            case "gzip":
            case "x-gzip":
                return ZlibWrapper.GZIP;
            case "deflate":
            case "x-deflate":
                // RFC 9110 deflate is zlib-wrapped; some clients send raw deflate (Netty's lenient mode)
                return ZlibWrapper.ZLIB_OR_NONE;
            default:
                return null;
        }
    }

    @Override
    protected EmbeddedChannel newContentDecoder(String contentEncoding) {
        ZlibWrapper w = wrapper(contentEncoding);
        if (w == null) {
            return null;   // identity, or the Transfer-Encoding Netty falls back on: passed through
        }
        inflater = new BodyInflater(w, limit);
        return EmbeddedChannel.builder().channelId(ctx.channel().id())
                .hasDisconnect(ctx.channel().metadata().hasDisconnect()).config(ctx.channel().config())
                .handlers(inflater).build();
    }

    /**
     * Netty's inflater with its maxAllocation at max_request_size (one read's output never gets
     * larger), which also reports a stream that ends early or has bytes after its end: Netty's
     * would hand on the part it got. One gzip member only (concatenated members are rare in HTTP).
     */
    static final class BodyInflater extends JdkZlibDecoder {
        boolean exhausted;
        boolean abandoned;
        /** Whether any byte came: an empty body is an empty body, whatever its Content-Encoding. */
        private boolean started;

        BodyInflater(ZlibWrapper wrapper, int maxAllocation) {
            super(wrapper, false, maxAllocation);
        }

        @Override
        protected void decode(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) throws Exception {
            if (abandoned) {
                in.skipBytes(in.readableBytes());
                return;
            }
            started |= in.isReadable();
            if (isClosed() && in.isReadable() && !exhausted) {
                throw new DecompressionException(in.readableBytes() + " bytes follow the end of the compressed data "
                        + "(several concatenated gzip members are not supported: send one)");
            }
            super.decode(ctx, in, out);
        }

        @Override
        protected void decodeLast(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) throws Exception {
            super.decodeLast(ctx, in, out);
            if (started && !isClosed() && !abandoned) {
                throw new DecompressionException("the compressed data ends early (truncated or not compressed)");
            }
        }

        @Override
        protected void decompressionBufferExhausted(ByteBuf buffer) {
            exhausted = true;
            super.decompressionBufferExhausted(buffer);
        }
    }
}

package org.tserve.http;

import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPipeline;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpMessage;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponseStatus;

/**
 * Netty's aggregator up to max_request_size; kept as a subclass only so that its 413 and 417
 * carry TorchServe's JSON error body (Netty's have none). Behind {@link RequestDecompressor}, the
 * limit counts a compressed body's decompressed bytes.
 */
final class SizeLimitedAggregator extends HttpObjectAggregator {
    private final int limit;

    SizeLimitedAggregator(int limit) {
        super(limit);
        this.limit = limit;
    }

    /**
     * With {@code Expect: 100-continue}, Netty answers a too large body (413) or an unknown
     * expectation (417) itself, with an empty body: these get the JSON error too.
     */
    @Override
    protected Object newContinueResponse(HttpMessage start, int maxContentLength, ChannelPipeline pipeline) {
        Object r = super.newContinueResponse(start, maxContentLength, pipeline);
        if (r instanceof FullHttpResponse) {
            FullHttpResponse netty = (FullHttpResponse) r;
            int code = netty.status().code();
            if (code == 413 || code == 417) {
                netty.release();
                EarlyErrors.access(pipeline.channel(), start, code);
                return code == 413 ? EarlyErrors.tooLarge(limit) : EarlyErrors.error(HttpResponseStatus.EXPECTATION_FAILED,
                        "ExpectationFailedException", "Only the expectation 100-continue is supported; remove the Expect header");
            }
        }
        return r;
    }

    /**
     * A body that grew past the limit while it was read (chunked, or decompressed): the rest is
     * unread, so the connection is closed after the 413. (Netty would keep a 100-continue
     * connection open and discard the rest, which for a compressed body means inflating it all.)
     */
    @Override
    protected void handleOversizedMessage(ChannelHandlerContext ctx, HttpMessage oversized) {
        EarlyErrors.sendAndClose(ctx, oversized, EarlyErrors.tooLarge(limit));
    }
}

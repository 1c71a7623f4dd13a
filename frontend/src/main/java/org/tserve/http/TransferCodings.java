package org.tserve.http;

import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.util.ReferenceCountUtil;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.tserve.util.LogText;

/**
 * A request's {@code Transfer-Encoding} as RFC 9112 §6.1 asks: {@code chunked} is the only coding
 * served. Netty's decoder already refuses a list whose last coding is not chunked, and
 * Content-Length beside Transfer-Encoding (400, connection closed); here {@code chunked} applied
 * twice is a 400 and any other coding ({@code identity, chunked}, {@code gzip, chunked}) a 501,
 * both closing the connection: its body cannot be read, so the bytes after it are no request.
 */
final class TransferCodings extends ChannelInboundHandlerAdapter {
    /** An answer was sent and the connection is closing: what follows is dropped. */
    private boolean refused;

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) throws Exception {
        if (refused) {
            ReferenceCountUtil.release(msg);
            return;
        }
        if (msg instanceof HttpRequest && ((HttpRequest) msg).decoderResult().isSuccess()) {
            HttpRequest req = (HttpRequest) msg;
            HttpError e = check(req.headers().getAll(HttpHeaderNames.TRANSFER_ENCODING));
            if (e != null) {
                refused = true;
                ReferenceCountUtil.release(msg);
                EarlyErrors.sendAndClose(ctx, req, EarlyErrors.error(HttpResponseStatus.valueOf(e.getStatus()),
                        e.getType(), e.getMessage()));
                return;
            }
        }
        super.channelRead(ctx, msg);
    }

    /** The error for a request's Transfer-Encoding header lines, or null when it is served. */
    static HttpError check(List<String> lines) {
        List<String> codings = new ArrayList<>();
        for (String line : lines) {
            for (String c : line.split(",")) {
                String name = c.trim().toLowerCase(Locale.ROOT);
                int semi = name.indexOf(';');   // a coding's parameters do not change its name
                codings.add(semi < 0 ? name : name.substring(0, semi).trim());
            }
        }
        int chunked = 0;
        for (String c : codings) {
            if (c.equals("chunked")) {
                chunked++;
            }
        }
        String header = LogText.quote(String.join(", ", lines));
        if (chunked > 1) {
            return new HttpError(400, "Transfer-Encoding " + header + " applies chunked more than once "
                    + "(RFC 9112 §6.1); send Transfer-Encoding: chunked once");
        }
        for (String c : codings) {
            if (!c.equals("chunked")) {
                return new HttpError(501, "NotImplementedException", "Transfer-Encoding " + header
                        + " names the coding " + LogText.quote(c) + ", which tserve does not implement; send the "
                        + "body with Transfer-Encoding: chunked alone or with Content-Length (compress it with "
                        + "Content-Encoding instead)");
            }
        }
        return null;
    }
}

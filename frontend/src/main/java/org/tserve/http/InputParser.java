package org.tserve.http;

import io.netty.buffer.ByteBufUtil;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.multipart.Attribute;
import io.netty.handler.codec.http.multipart.DefaultHttpDataFactory;
import io.netty.handler.codec.http.multipart.FileUpload;
import io.netty.handler.codec.http.multipart.HttpPostRequestDecoder;
import io.netty.handler.codec.http.multipart.InterfaceHttpData;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.tserve.wlm.protocol.Header;
import org.tserve.wlm.protocol.Part;

/** Turns an HTTP request into the handler's inputs and headers (TorchServe §1.3). */
final class InputParser {
    private InputParser() {
    }

    /** Every request header as received (name case kept), in order. */
    static List<Header> headers(FullHttpRequest req) {
        return headers(req, 0);
    }

    /** Same, in a list with room for {@code extra} more headers (the frontend's own). */
    static List<Header> headers(FullHttpRequest req, int extra) {
        List<Header> out = new ArrayList<>(req.headers().size() + extra);
        for (Map.Entry<String, String> e : req.headers()) {
            out.add(new Header(e.getKey(), e.getValue()));
        }
        return out;
    }

    /**
     * The inputs: one part per multipart or form field (file parts keep their content type,
     * plain fields have none), else a single {@code body} part with the request's MIME type.
     */
    static List<Part> parts(FullHttpRequest req) throws HttpError {
        String ct = req.headers().get(HttpHeaderNames.CONTENT_TYPE);
        String mime = ct == null ? "" : HttpUtil.getMimeType(ct) == null ? "" : HttpUtil.getMimeType(ct).toString()
                .toLowerCase(Locale.ROOT).trim();
        List<Part> parts = new ArrayList<>();
        if (mime.equals("multipart/form-data") || mime.equals("application/x-www-form-urlencoded")) {
            HttpPostRequestDecoder dec;
            try {
                dec = new HttpPostRequestDecoder(new DefaultHttpDataFactory(false), req, StandardCharsets.UTF_8);
            } catch (HttpPostRequestDecoder.ErrorDataDecoderException e) {
                throw new HttpError(400, "Cannot decode " + mime + " body: " + e.getMessage());
            }
            try {
                for (InterfaceHttpData d : dec.getBodyHttpDatas()) {
                    if (d instanceof FileUpload) {
                        FileUpload f = (FileUpload) d;
                        String fct = f.getContentType() == null ? "" : f.getContentType();
                        parts.add(new Part(f.getName(), fct, ByteBufUtil.getBytes(f.getByteBuf())));
                    } else if (d instanceof Attribute) {
                        Attribute a = (Attribute) d;
                        parts.add(new Part(a.getName(), "", ByteBufUtil.getBytes(a.getByteBuf())));
                    }
                }
            } catch (HttpPostRequestDecoder.ErrorDataDecoderException | IOException e) {
                throw new HttpError(400, "Cannot decode " + mime + " body: " + e.getMessage());
            } finally {
                dec.destroy();
            }
            return parts;
        }
        parts.add(new Part("body", mime, ByteBufUtil.getBytes(req.content())));
        return parts;
    }
}

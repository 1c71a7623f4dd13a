package org.tserve.http;

import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.DefaultHttpRequest;
import io.netty.handler.codec.http.DefaultLastHttpContent;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.QueryStringDecoder;
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
import org.tserve.util.LogText;
import org.tserve.wlm.protocol.Header;
import org.tserve.wlm.protocol.Part;

/** Turns an HTTP request into the handler's inputs and headers as TorchServe does. */
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
     * A form or multipart body must yield its fields: bytes that would be silently dropped are a
     * 400 naming the problem instead.
     */
    static List<Part> parts(FullHttpRequest req) throws HttpError {
        String ct = req.headers().get(HttpHeaderNames.CONTENT_TYPE);
        String mime = ct == null ? "" : HttpUtil.getMimeType(ct) == null ? "" : HttpUtil.getMimeType(ct).toString()
                .toLowerCase(Locale.ROOT).trim();
        if (mime.equals("application/x-www-form-urlencoded")) {
            return formFields(req.content().toString(StandardCharsets.UTF_8));
        }
        if (mime.equals("multipart/form-data")) {
            return multipart(req, ct);
        }
        List<Part> parts = new ArrayList<>();
        parts.add(new Part("body", mime, ByteBufUtil.getBytes(req.content())));
        return parts;
    }

    /**
     * The parts of a {@code multipart/form-data} body. Netty's decoder throws all kinds of runtime
     * exceptions on malformed input (an empty boundary, an unknown charset, a cut part): each is a
     * 400 naming the problem. Without a boundary Netty would read the body as a URL-encoded form.
     */
    private static List<Part> multipart(FullHttpRequest req, String contentType) throws HttpError {
        if (!hasBoundary(contentType)) {
            throw new HttpError(400, "Cannot decode multipart/form-data body: the Content-Type has no boundary=... "
                    + "parameter (got " + LogText.quote(contentType) + ")");
        }
        List<Part> parts = new ArrayList<>();
        // Netty's decoder (4.1.48) loses buffers when it fails: built on the full request it
        // decodes in its constructor (no destroy() possible), and destroy() misses the part being
        // decoded. Fed a heap copy of the body, whatever it loses is garbage-collected memory; built
        // on the head alone and fed the body afterwards, it can always be destroyed. Before, every
        // malformed body leaked pooled direct memory.
        HttpRequest head = new DefaultHttpRequest(req.protocolVersion(), req.method(), req.uri(), req.headers());
        HttpPostRequestDecoder dec = null;
        try {
            dec = new HttpPostRequestDecoder(new DefaultHttpDataFactory(false), head, StandardCharsets.UTF_8);
            dec.offer(new DefaultLastHttpContent(Unpooled.wrappedBuffer(ByteBufUtil.getBytes(req.content()))));
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
        } catch (RuntimeException | IOException e) {
            throw new HttpError(400, "Cannot decode multipart/form-data body: "
                    + (e instanceof HttpPostRequestDecoder.ErrorDataDecoderException ? e.getMessage() : e.toString()));
        } finally {
            if (dec != null) {
                dec.destroy();
            }
        }
        if (parts.isEmpty() && req.content().isReadable()) {
            throw new HttpError(400, "Cannot decode multipart/form-data body: no part found in its "
                    + req.content().readableBytes() + " bytes (the Content-Type's boundary must delimit the parts, "
                    + "and each part needs a Content-Disposition: form-data; name=\"...\" header)");
        }
        return parts;
    }

    /** Whether a multipart Content-Type names a non-empty boundary. */
    static boolean hasBoundary(String contentType) {
        for (String param : contentType.split(";")) {
            int eq = param.indexOf('=');
            if (eq > 0 && param.substring(0, eq).trim().equalsIgnoreCase("boundary")) {
                String value = param.substring(eq + 1).trim();
                if (value.length() >= 2 && value.startsWith("\"") && value.endsWith("\"")) {
                    value = value.substring(1, value.length() - 1);
                }
                return !value.isEmpty();
            }
        }
        return false;
    }

    /**
     * The fields of an {@code application/x-www-form-urlencoded} body, in order: {@code name=value}
     * pairs separated by {@code &}; a name without {@code =} has an empty value (Netty's decoder
     * dropped such a field at the end of the body, so {@code curl -d text} reached the handler as
     * nothing at all).
     */
    static List<Part> formFields(String body) throws HttpError {
        List<Part> parts = new ArrayList<>();
        for (String field : body.split("&")) {
            if (field.isEmpty()) {
                continue;
            }
            int eq = field.indexOf('=');
            String name;
            String value;
            try {
                name = QueryStringDecoder.decodeComponent(eq < 0 ? field : field.substring(0, eq), StandardCharsets.UTF_8);
                value = eq < 0 ? "" : QueryStringDecoder.decodeComponent(field.substring(eq + 1), StandardCharsets.UTF_8);
            } catch (IllegalArgumentException e) {
                throw new HttpError(400, "Cannot decode application/x-www-form-urlencoded body: " + e.getMessage());
            }
            if (name.isEmpty()) {
                throw new HttpError(400, "Cannot decode application/x-www-form-urlencoded body: a field has no name ("
                        + LogText.quote(field) + "); send name=value pairs, or the data with its own Content-Type");
            }
            parts.add(new Part(name, "", value.getBytes(StandardCharsets.UTF_8)));
        }
        return parts;
    }
}

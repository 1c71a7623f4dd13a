package org.tserve.http;

import io.netty.buffer.ByteBuf;
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
import io.netty.util.ByteProcessor;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.tserve.util.LogText;
import org.tserve.wlm.api.Header;
import org.tserve.wlm.api.Part;

/** Turns an HTTP request into the handler's inputs and headers as TorchServe does. */
final class InputParser {
    /** Netty's cap on a multipart part's buffered headers (its default; no key, TorchServe has none). */
    static final int MULTIPART_BUFFERED_BYTES = 1024;
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
    static List<Part> parts(FullHttpRequest req, FormLimits limits) throws HttpError {
        String ct = req.headers().get(HttpHeaderNames.CONTENT_TYPE);
        String mime = ct == null ? "" : HttpUtil.getMimeType(ct) == null ? "" : HttpUtil.getMimeType(ct).toString()
                .toLowerCase(Locale.ROOT).trim();
        if (mime.equals("application/x-www-form-urlencoded")) {
            if (req.content().isReadable() && req.content().bytesBefore((byte) '=') < 0
                    && req.content().bytesBefore((byte) '&') < 0) {
                // curl -d 'Once upon a time' labels plain text as a form: with no '=' and no '&' it is one field
                // without a value, i.e. the text itself, the handler's body input as sent (an LLM handler's prompt)
                return new ArrayList<>(List.of(new Part("body", "text/plain", ByteBufUtil.getBytes(req.content()))));
            }
            return formFields(req.content(), limits);
        }
        if (mime.equals("multipart/form-data")) {
            return multipart(req, ct, limits);
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
    private static List<Part> multipart(FullHttpRequest req, String contentType, FormLimits limits) throws HttpError {
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
        // the URI plays no part in the body: a path Netty's decoder cannot read (invalid percent-encoded UTF-8)
        // must not fail the request before the route answers (404 for an unknown model, as with other bodies)
        HttpRequest head = new DefaultHttpRequest(req.protocolVersion(), req.method(), "/", req.headers());
        HttpPostRequestDecoder dec = null;
        try {
            dec = new HttpPostRequestDecoder(new DefaultHttpDataFactory(false), head, StandardCharsets.UTF_8,
                    limits.maxFields, MULTIPART_BUFFERED_BYTES);
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
        } catch (HttpPostRequestDecoder.TooManyFormFieldsException e) {
            throw new HttpError(400, limits.tooManyFields("multipart/form-data", limits.maxFields + 1L).getMessage());
        } catch (HttpPostRequestDecoder.TooLongFormFieldException e) {
            throw new HttpError(400, "Cannot decode multipart/form-data body: a part's headers or name are longer than "
                    + MULTIPART_BUFFERED_BYTES + " bytes (tserve's fixed limit); send shorter "
                    + "part headers");
        } catch (RuntimeException | IOException e) {
            throw new HttpError(400, "Cannot decode multipart/form-data body: " + reason(e));
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

    /** A decoding failure's message for the client: Netty's reason, never a Java class name. */
    private static String reason(Throwable e) {
        Throwable t = e;
        while (t.getMessage() == null && t.getCause() != null) {
            t = t.getCause();
        }
        return t.getMessage() == null ? "the body is malformed" : t.getMessage();
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
     * nothing at all). The fields are counted on the raw bytes before anything is decoded, so an
     * over-long form costs one scan, not a string per field.
     */
    static List<Part> formFields(ByteBuf body, FormLimits limits) throws HttpError {
        String kind = "application/x-www-form-urlencoded";
        int separators = body.forEachByte(new ByteProcessor() {
            int seen;

            @Override
            public boolean process(byte b) {
                return b != '&' || ++seen < limits.maxFields;
            }
        });
        if (separators >= 0) {   // the scan stopped at the max_form_fields-th '&'
            throw limits.tooManyFields(kind, limits.maxFields + 1L);
        }
        String text = body.toString(StandardCharsets.UTF_8);
        List<Part> parts = new ArrayList<>();
        long decoded = 0;
        int from = 0;
        while (from <= text.length()) {
            int end = text.indexOf('&', from);
            end = end < 0 ? text.length() : end;
            String field = text.substring(from, end);
            from = end + 1;
            if (field.isEmpty()) {
                continue;
            }
            int eq = field.indexOf('=');
            String rawName = eq < 0 ? field : field.substring(0, eq);
            if (rawName.length() > limits.maxKeyLength * 3L) {   // %XX: three characters per byte at most
                throw limits.keyTooLong(rawName.length());
            }
            String name;
            byte[] value;
            try {
                name = QueryStringDecoder.decodeComponent(rawName, StandardCharsets.UTF_8);
                value = (eq < 0 ? "" : QueryStringDecoder.decodeComponent(field.substring(eq + 1), StandardCharsets.UTF_8))
                        .getBytes(StandardCharsets.UTF_8);
            } catch (IllegalArgumentException e) {
                throw new HttpError(400, "Cannot decode " + kind + " body: " + e.getMessage());
            }
            if (name.isEmpty()) {
                throw new HttpError(400, "Cannot decode " + kind + " body: a field has no name ("
                        + LogText.quote(field) + "); send name=value pairs, or the data with its own Content-Type");
            }
            if (name.length() > limits.maxKeyLength) {
                throw limits.keyTooLong(name.length());
            }
            decoded += name.length() + value.length;
            if (decoded > limits.maxDecodedSize) {
                throw limits.tooLarge(decoded);
            }
            parts.add(new Part(name, "", value));
        }
        return parts;
    }
}

package org.tserve.http;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.PoolArenaMetric;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.DefaultFullHttpRequest;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpVersion;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.Test;
import org.tserve.wlm.protocol.Part;

/** Form and multipart bodies become handler inputs, or a 400 naming the problem: never lost, never a 500. */
public class InputParserTest {
    private static FullHttpRequest request(String contentType, String body) {
        FullHttpRequest r = new DefaultFullHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.POST, "/predictions/m",
                Unpooled.copiedBuffer(body, StandardCharsets.UTF_8));
        r.headers().set("Content-Type", contentType);
        r.headers().set("Content-Length", r.content().readableBytes());
        return r;
    }

    private static String fields(List<Part> parts) {
        StringBuilder sb = new StringBuilder();
        for (Part p : parts) {
            sb.append(p.name()).append('=').append(new String(p.value(), StandardCharsets.UTF_8)).append(';');
        }
        return sb.toString();
    }

    private static void assert400(String contentType, String body, String messagePart) {
        FullHttpRequest r = request(contentType, body);
        try {
            InputParser.parts(r);
            fail("accepted " + contentType + " body " + body);
        } catch (HttpError e) {
            assertEquals(400, e.getStatus());
            assertTrue(e.getMessage(), e.getMessage().contains(messagePart));
        } finally {
            r.release();
        }
    }

    @Test
    public void everyUrlEncodedFieldIsKept() throws HttpError {
        String form = "application/x-www-form-urlencoded";
        // curl -d text sends this: the trailing field without '=' was dropped, the handler got nothing
        assertEquals("hello=;", fields(InputParser.parts(request(form, "hello"))));
        assertEquals("a=1;b=;", fields(InputParser.parts(request(form, "a=1&b"))));
        assertEquals("b=;a=x y/z;", fields(InputParser.parts(request(form, "b&&a=x+y%2Fz"))));
        assertEquals("", fields(InputParser.parts(request(form, ""))));
        assert400(form, "=x", "a field has no name");
        assert400(form, "a=%ZZ", "x-www-form-urlencoded");
    }

    @Test
    public void malformedMultipartIs400() throws HttpError {
        String part = "--XX\r\nContent-Disposition: form-data; name=\"data\"\r\n\r\nhello\r\n--XX--\r\n";
        assertEquals("data=hello;", fields(InputParser.parts(request("multipart/form-data; boundary=XX", part))));
        assertEquals("data=hello;", fields(InputParser.parts(request("multipart/form-data; boundary=\"XX\"", part))));
        // Netty's decoder threw StringIndexOutOfBoundsException / UnsupportedCharsetException (500)
        assert400("multipart/form-data; boundary=", part, "no boundary");
        assert400("multipart/form-data; boundary=XX; charset=bogus", part, "bogus");
        // without a boundary Netty read the parts as a URL-encoded form
        assert400("multipart/form-data; charset=utf-8", part, "no boundary");
        // bytes that hold no part were dropped: the handler got no input at all
        assert400("multipart/form-data; boundary=XX", "--XX\r\nTrue--XX--\r\n", "no part found");
        assert400("multipart/form-data; boundary=XX", "garbage", "no part found");
    }

    /**
     * A multipart body that fails after some parts were decoded releases them: the body comes from
     * an allocator of the test's own, which must end with no buffer in use.
     */
    @Test
    public void aFailedMultipartDecodeReleasesWhatItDecoded() {
        // no thread caches: a released buffer goes back to its arena at once (the count is exact)
        PooledByteBufAllocator alloc = new PooledByteBufAllocator(true, 0, 1, 8192, 11, 0, 0, false);
        String good = "--XX\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n" + "v".repeat(4096) + "\r\n";
        String[] bodies = {
            good + "--XX\r\nContent-Disposition: form-data; name=\"b\"\r\nContent-Type: multipart/mixed\r\n\r\nw\r\n--XX--\r\n",
            good + "--XX\r\nContent-Disposition: form-data; name=\"b\"; filename=\"f\"\r\n"
                + "Content-Type: text/plain; charset=bogus\r\n\r\nw\r\n--XX--\r\n",
        };
        for (String body : bodies) {
            ByteBuf content = alloc.directBuffer();
            content.writeCharSequence(body, StandardCharsets.UTF_8);
            FullHttpRequest r = new DefaultFullHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.POST, "/predictions/m", content);
            r.headers().set("Content-Type", "multipart/form-data; boundary=XX");
            try {
                InputParser.parts(r);
                fail("accepted " + body);
            } catch (HttpError e) {
                assertEquals(400, e.getStatus());
            } finally {
                r.release();
            }
        }
        long inUse = 0;
        for (PoolArenaMetric arena : alloc.metric().directArenas()) {
            inUse += arena.numActiveAllocations();
        }
        assertEquals("buffers left unreleased", 0, inUse);
    }

    @Test
    public void otherBodiesAreOneInput() throws HttpError {
        List<Part> parts = InputParser.parts(request("application/json; charset=utf-8", "{\"a\": 1}"));
        assertEquals(1, parts.size());
        assertEquals("body", parts.get(0).name());
        assertEquals("application/json", parts.get(0).contentType());
    }
}

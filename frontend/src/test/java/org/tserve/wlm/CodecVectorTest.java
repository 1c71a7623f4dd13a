package org.tserve.wlm;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import org.junit.Test;
import org.tserve.wlm.api.Header;
import org.tserve.wlm.api.Part;
import org.tserve.wlm.api.Response;
import org.tserve.wlm.protocol.Codec;
import org.tserve.wlm.protocol.Frame;
import org.tserve.wlm.protocol.FrameType;
import org.tserve.wlm.protocol.ProtocolException;
import org.tserve.wlm.protocol.Request;

/** The Java codec against the byte-exact vectors in test/protocol_vectors (shared with the Python codec). */
public class CodecVectorTest {
    private static File vectorDir() {
        return new File(System.getProperty("tserve.repo", "../"), "test/protocol_vectors");
    }

    private static List<Header> headers(JsonArray a) {
        List<Header> out = new ArrayList<>();
        for (JsonElement e : a) {
            out.add(new Header(e.getAsJsonArray().get(0).getAsString(), e.getAsJsonArray().get(1).getAsString()));
        }
        return out;
    }

    private static byte[] b64(String s) {
        return Base64.getDecoder().decode(s);
    }

    @Test
    public void everyVectorDecodesAndReEncodes() throws Exception {
        File[] files = vectorDir().listFiles((d, n) -> n.endsWith(".json"));
        assertTrue("no vectors found in " + vectorDir(), files != null && files.length >= 10);
        int binaryChecked = 0;
        for (File jf : files) {
            JsonObject meaning = JsonParser.parseString(new String(Files.readAllBytes(jf.toPath()), StandardCharsets.UTF_8))
                    .getAsJsonObject();
            String name = meaning.get("name").getAsString();
            byte[] bin = Files.readAllBytes(new File(vectorDir(), name + ".bin").toPath());
            Frame f = Codec.decodeFrame(bin);
            assertEquals(name, meaning.get("type").getAsString(), FrameType.name(f.type));
            assertEquals(name, meaning.get("type_code").getAsInt(), f.type);
            assertEquals(name, meaning.get("batch_id").getAsLong(), f.batchId);
            assertEquals(name, meaning.get("length").getAsLong(), bin.length - 4);
            if (meaning.has("requests")) {
                List<Request> reqs = Codec.decodeBatch(f.body);
                JsonArray exp = meaning.getAsJsonArray("requests");
                assertEquals(name, exp.size(), reqs.size());
                List<Request> rebuilt = new ArrayList<>();
                for (int i = 0; i < exp.size(); i++) {
                    JsonObject r = exp.get(i).getAsJsonObject();
                    List<Part> parts = new ArrayList<>();
                    for (JsonElement pe : r.getAsJsonArray("parts")) {
                        JsonObject p = pe.getAsJsonObject();
                        parts.add(new Part(p.get("name").getAsString(), p.get("content_type").getAsString(),
                                b64(p.get("value_b64").getAsString())));
                    }
                    Request built = new Request(r.get("request_id").getAsString(), headers(r.getAsJsonArray("headers")), parts);
                    rebuilt.add(built);
                    Request got = reqs.get(i);
                    assertEquals(name, built.requestId(), got.requestId());
                    assertEquals(name, built.headers(), got.headers());
                    assertEquals(name, built.parts().size(), got.parts().size());
                    for (int k = 0; k < parts.size(); k++) {
                        assertEquals(name, parts.get(k).name(), got.parts().get(k).name());
                        assertEquals(name, parts.get(k).contentType(), got.parts().get(k).contentType());
                        assertArrayEquals(name, parts.get(k).value(), got.parts().get(k).value());
                    }
                }
                assertArrayEquals(name, bin, Codec.encodeFrame(f.type, f.batchId, Codec.encodeBatch(rebuilt)));
                binaryChecked++;
            } else if (meaning.has("responses")) {
                List<Response> rs = Codec.decodeResponses(f.body);
                JsonArray exp = meaning.getAsJsonArray("responses");
                assertEquals(name, exp.size(), rs.size());
                List<Response> rebuilt = new ArrayList<>();
                for (int i = 0; i < exp.size(); i++) {
                    JsonObject r = exp.get(i).getAsJsonObject();
                    Response built = new Response(r.get("request_id").getAsString(), r.get("status").getAsInt(),
                            r.get("message").getAsString(), r.get("content_type").getAsString(),
                            headers(r.getAsJsonArray("headers")), b64(r.get("body_b64").getAsString()));
                    rebuilt.add(built);
                    Response got = rs.get(i);
                    assertEquals(name, built.requestId(), got.requestId());
                    assertEquals(name, built.status(), got.status());
                    assertEquals(name, built.message(), got.message());
                    assertEquals(name, built.contentType(), got.contentType());
                    assertEquals(name, built.headers(), got.headers());
                    assertArrayEquals(name, built.body(), got.body());
                }
                assertArrayEquals(name, bin, Codec.encodeFrame(f.type, f.batchId, Codec.encodeResponses(rebuilt)));
                binaryChecked++;
            } else if (meaning.has("text")) {
                assertEquals(name, meaning.get("text").getAsString(), f.text());
                assertArrayEquals(name, bin, Codec.encodeFrame(f.type, f.batchId,
                        meaning.get("text").getAsString().getBytes(StandardCharsets.UTF_8)));
                binaryChecked++;
            } else if (meaning.has("json")) {
                JsonElement got = JsonParser.parseString(f.text());
                assertEquals(name, meaning.get("json"), got);
                byte[] re = Codec.encodeFrame(f.type, f.batchId, meaning.get("json").toString().getBytes(StandardCharsets.UTF_8));
                Frame back = Codec.decodeFrame(re);
                assertEquals(name, f.type, back.type);
                assertEquals(name, f.batchId, back.batchId);
                assertEquals(name, meaning.get("json"), JsonParser.parseString(back.text()));
            } else {
                assertEquals(name, 0, f.body.length);
                assertArrayEquals(name, bin, Codec.encodeFrame(f.type, f.batchId, new byte[0]));
                binaryChecked++;
            }
        }
        assertTrue("binary vectors checked: " + binaryChecked, binaryChecked >= 5);
    }

    @Test(expected = ProtocolException.class)
    public void truncatedBodyIsRejected() throws Exception {
        byte[] body = Codec.encodeResponses(List.of(new Response("a", 200, "", "", List.of(), new byte[] {1, 2, 3})));
        byte[] cut = new byte[body.length - 2];
        System.arraycopy(body, 0, cut, 0, cut.length);
        Codec.decodeResponses(cut);
    }

    @Test
    public void frameAboveTheLimitIsRejectedByTheReader() throws Exception {
        byte[] frame = Codec.encodeFrame(FrameType.RESULT, 3, new byte[100]);
        java.nio.channels.ReadableByteChannel ch = java.nio.channels.Channels.newChannel(new java.io.ByteArrayInputStream(frame));
        try {
            Codec.read(ch, 50);
            throw new AssertionError("expected a ProtocolException");
        } catch (ProtocolException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("max_response_size"));
        }
        ch = java.nio.channels.Channels.newChannel(new java.io.ByteArrayInputStream(frame));
        Frame f = Codec.read(ch, 100);
        assertEquals(3, f.batchId);
        assertEquals(100, f.body.length);
    }
}

package org.tserve.grpc;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import com.google.gson.JsonObject;
import com.google.protobuf.ByteString;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import org.junit.Test;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.InferParameter;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.InferTensorContents;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.ModelInferRequest;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.ModelInferResponse;

public class OipTensorsTest {
    private static ModelInferRequest.InferInputTensor tensor(String name, String dt, long... shape) {
        ModelInferRequest.InferInputTensor.Builder b = ModelInferRequest.InferInputTensor.newBuilder().setName(name).setDatatype(dt);
        for (long s : shape) {
            b.addShape(s);
        }
        return b.build();
    }

    @Test
    public void typedContentsBecomeKserveV2Json() {
        ModelInferRequest req = ModelInferRequest.newBuilder().setModelName("m").setId("1")
            .putParameters("p", InferParameter.newBuilder().setInt64Param(3).build())
            .addInputs(tensor("a", "INT64", 2).toBuilder()
                .setContents(InferTensorContents.newBuilder().addInt64Contents(5).addInt64Contents(-1)))
            .addInputs(tensor("b", "BYTES", 1).toBuilder()
                .setContents(InferTensorContents.newBuilder().addBytesContents(ByteString.copyFromUtf8("hi"))))
            .build();
        JsonObject o = OipTensors.toJson(req);
        assertEquals("{\"id\":\"1\",\"model_name\":\"m\",\"parameters\":{\"p\":3},\"inputs\":["
            + "{\"name\":\"a\",\"shape\":[2],\"datatype\":\"INT64\",\"data\":[5,-1]},"
            + "{\"name\":\"b\",\"shape\":[1],\"datatype\":\"BYTES\",\"data\":[\"hi\"]}]}", o.toString());
    }

    @Test
    public void bytesElementsAreTextUnlessOneIsNotUtf8() {
        byte[] notText = {(byte) 0xff, 'a'};
        ByteBuffer raw = ByteBuffer.allocate(4 + 2 + 4 + 2).order(ByteOrder.LITTLE_ENDIAN);
        raw.putInt(2).put(new byte[] {'o', 'k'}).putInt(2).put(notText);
        ModelInferRequest req = ModelInferRequest.newBuilder().setModelName("m").addInputs(tensor("b", "BYTES", 2))
            .addRawInputContents(ByteString.copyFrom(raw.array())).build();
        JsonObject in = OipTensors.toJson(req).getAsJsonArray("inputs").get(0).getAsJsonObject();
        assertEquals("[\"b2s=\",\"/2E=\"]", in.get("data").toString());
        assertEquals("{\"" + OipTensors.BASE64_PARAMETER + "\":true}", in.get("parameters").toString());
    }

    @Test
    public void rawInputsGetRawOutputs() {
        ModelInferRequest req = ModelInferRequest.newBuilder().setModelName("m").addInputs(tensor("x", "FP32", 1))
            .addRawInputContents(ByteString.copyFrom(new byte[4])).build();
        ModelInferResponse r = OipTensors.fromJson("{\"outputs\":["
            + "{\"name\":\"f\",\"datatype\":\"FP32\",\"shape\":[2],\"data\":[1.5,-2]},"
            + "{\"name\":\"i\",\"datatype\":\"INT64\",\"shape\":[1],\"data\":[3000000000]},"
            + "{\"name\":\"h\",\"datatype\":\"FP16\",\"shape\":[3],\"data\":[1.0,-2.0,65504]},"
            + "{\"name\":\"u\",\"datatype\":\"UINT8\",\"shape\":[1],\"data\":[255]},"
            + "{\"name\":\"b\",\"datatype\":\"BOOL\",\"shape\":[1],\"data\":[true]},"
            + "{\"name\":\"s\",\"datatype\":\"BYTES\",\"shape\":[1],\"data\":[\"cat\"]}]}", req);
        assertEquals(6, r.getRawOutputContentsCount());
        ByteBuffer f = r.getRawOutputContents(0).asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
        assertEquals(1.5f, f.getFloat(), 0);
        assertEquals(-2f, f.getFloat(), 0);
        assertEquals(3000000000L, r.getRawOutputContents(1).asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN).getLong());
        ByteBuffer h = r.getRawOutputContents(2).asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
        assertEquals(1.0f, OipTensors.halfToFloat(h.getShort()), 0);
        assertEquals(-2.0f, OipTensors.halfToFloat(h.getShort()), 0);
        assertEquals(65504f, OipTensors.halfToFloat(h.getShort()), 0);
        assertEquals((byte) 255, r.getRawOutputContents(3).byteAt(0));
        assertEquals(1, r.getRawOutputContents(4).byteAt(0));
        assertEquals(ByteString.copyFrom(new byte[] {3, 0, 0, 0, 'c', 'a', 't'}), r.getRawOutputContents(5));
        assertTrue(r.getOutputs(0).getContents().getFp32ContentsList().isEmpty());
    }

    @Test
    public void floatToHalfRoundsAndSaturates() {
        for (float v : new float[] {0f, 1f, -2f, 0.5f, 65504f, 6.1035156e-5f, 5.9604645e-8f}) {
            assertEquals(v, OipTensors.halfToFloat(RawOutputs.floatToHalf(v)), 0);
        }
        assertTrue(Float.isInfinite(OipTensors.halfToFloat(RawOutputs.floatToHalf(1e6f))));
        assertTrue(Float.isNaN(OipTensors.halfToFloat(RawOutputs.floatToHalf(Float.NaN))));
        assertEquals(0f, OipTensors.halfToFloat(RawOutputs.floatToHalf(1e-10f)), 0);
    }

    @Test
    public void rawContentsAreLittleEndian() {
        ByteBuffer b = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
        b.putShort((short) 0x3c00).putShort((short) 0xc000).putInt(7);   // fp16 1.0, -2.0 ; then an int32 input
        byte[] all = b.array();
        ModelInferRequest req = ModelInferRequest.newBuilder().setModelName("m")
            .addInputs(tensor("h", "FP16", 2)).addInputs(tensor("i", "UINT32", 1))
            .addRawInputContents(ByteString.copyFrom(all, 0, 4)).addRawInputContents(ByteString.copyFrom(all, 4, 4))
            .build();
        JsonObject o = OipTensors.toJson(req);
        assertEquals("[1.0,-2.0]", o.getAsJsonArray("inputs").get(0).getAsJsonObject().get("data").toString());
        assertEquals("[7]", o.getAsJsonArray("inputs").get(1).getAsJsonObject().get("data").toString());
    }

    @Test
    public void badRawContentsNameTheInput() {
        ModelInferRequest wrongCount = ModelInferRequest.newBuilder().setModelName("m").addInputs(tensor("x", "FP32", 1))
            .addRawInputContents(ByteString.copyFrom(new byte[4])).addRawInputContents(ByteString.copyFrom(new byte[4])).build();
        ModelInferRequest wrongSize = ModelInferRequest.newBuilder().setModelName("m").addInputs(tensor("x", "FP64", 1))
            .addRawInputContents(ByteString.copyFrom(new byte[5])).build();
        ModelInferRequest fp16Typed = ModelInferRequest.newBuilder().setModelName("m").addInputs(tensor("x", "FP16", 1)).build();
        for (ModelInferRequest r : List.of(wrongCount, wrongSize, fp16Typed)) {
            try {
                OipTensors.toJson(r);
                fail("accepted " + r);
            } catch (IllegalArgumentException e) {
                assertTrue(e.getMessage(), e.getMessage().contains("raw_input_contents") || e.getMessage().contains("input x"));
            }
        }
    }

    @Test
    public void halfPrecision() {
        assertEquals(1.0f, OipTensors.halfToFloat((short) 0x3c00), 0);
        assertEquals(-2.0f, OipTensors.halfToFloat((short) 0xc000), 0);
        assertEquals(65504f, OipTensors.halfToFloat((short) 0x7bff), 0);
        assertEquals(5.9604645e-8f, OipTensors.halfToFloat((short) 0x0001), 1e-12);
        assertTrue(Float.isInfinite(OipTensors.halfToFloat((short) 0x7c00)));
        assertTrue(Float.isNaN(OipTensors.halfToFloat((short) 0x7e00)));
    }

    @Test
    public void handlerAnswerBecomesTypedOutputs() {
        ModelInferRequest req = ModelInferRequest.newBuilder().setModelName("m").setId("9").build();
        ModelInferResponse r = OipTensors.fromJson("{\"id\":\"9\",\"model_name\":\"m\",\"model_version\":\"2\","
            + "\"outputs\":[{\"name\":\"o\",\"datatype\":\"FP32\",\"shape\":[2,1],\"data\":[[1.5],[2]]},"
            + "{\"name\":\"s\",\"datatype\":\"BYTES\",\"shape\":[1],\"data\":[\"cat\"]}]}", req);
        assertEquals("2", r.getModelVersion());
        assertEquals(List.of(1.5f, 2f), r.getOutputs(0).getContents().getFp32ContentsList());
        assertEquals(List.of(2L, 1L), r.getOutputs(0).getShapeList());
        assertEquals("cat", r.getOutputs(1).getContents().getBytesContents(0).toStringUtf8());
        try {
            OipTensors.fromJson("{\"predictions\": [1]}", req);
            fail();
        } catch (IllegalArgumentException e) {
            assertTrue(e.getMessage().contains("kservev2"));
        }
    }
}

package org.tserve.grpc;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;
import com.google.protobuf.ByteString;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.InferParameter;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.InferTensorContents;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.ModelInferRequest;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.ModelInferResponse;

/**
 * Open Inference Protocol tensors between gRPC messages and the KServe v2 JSON that the
 * {@code kservev2} envelope reads and writes: typed contents or little-endian raw bytes in,
 * JSON {@code data} lists; JSON {@code outputs} back into typed contents. BYTES elements travel
 * as text in the JSON, as a REST client sends them ({@link #bytesData}), and as UTF-8 on the way back.
 */
final class OipTensors {
    /** The input parameter marking BYTES elements carried as base64 (the envelope's BASE64_PARAMETER). */
    static final String BASE64_PARAMETER = "tserve_bytes_base64";

    private OipTensors() {
    }

    /** A request's KServe v2 JSON body; bad tensors throw IllegalArgumentException naming the input. */
    static JsonObject toJson(ModelInferRequest req) {
        JsonObject o = new JsonObject();
        o.addProperty("id", req.getId());
        o.addProperty("model_name", req.getModelName());
        if (!req.getModelVersion().isEmpty()) {
            o.addProperty("model_version", req.getModelVersion());
        }
        if (req.getParametersCount() > 0) {
            o.add("parameters", parameters(req.getParametersMap()));
        }
        boolean raw = req.getRawInputContentsCount() > 0;
        if (raw && req.getRawInputContentsCount() != req.getInputsCount()) {
            throw new IllegalArgumentException("raw_input_contents has " + req.getRawInputContentsCount()
                    + " entries for " + req.getInputsCount() + " inputs; give one per input, in order");
        }
        JsonArray inputs = new JsonArray();
        for (int i = 0; i < req.getInputsCount(); i++) {
            ModelInferRequest.InferInputTensor t = req.getInputs(i);
            JsonObject in = new JsonObject();
            in.addProperty("name", t.getName());
            JsonArray shape = new JsonArray();
            t.getShapeList().forEach(shape::add);
            in.add("shape", shape);
            in.addProperty("datatype", t.getDatatype());
            if (t.getParametersCount() > 0) {
                in.add("parameters", parameters(t.getParametersMap()));
            }
            if (t.getDatatype().equalsIgnoreCase("BYTES")) {
                List<byte[]> elements = raw ? rawBytes(t.getName(), req.getRawInputContents(i))
                        : t.getContents().getBytesContentsList().stream().map(ByteString::toByteArray).toList();
                in.add("data", bytesData(elements, in));
            } else {
                in.add("data", raw ? fromRaw(t.getName(), t.getDatatype(), req.getRawInputContents(i))
                    : fromContents(t.getName(), t.getDatatype(), t.getContents()));
            }
            inputs.add(in);
        }
        o.add("inputs", inputs);
        if (req.getOutputsCount() > 0) {
            JsonArray outs = new JsonArray();
            for (ModelInferRequest.InferRequestedOutputTensor t : req.getOutputsList()) {
                JsonObject x = new JsonObject();
                x.addProperty("name", t.getName());
                outs.add(x);
            }
            o.add("outputs", outs);
        }
        return o;
    }

    private static JsonObject parameters(Map<String, InferParameter> ps) {
        JsonObject o = new JsonObject();
        for (Map.Entry<String, InferParameter> e : ps.entrySet()) {
            InferParameter p = e.getValue();
            switch (p.getParameterChoiceCase()) {
                case BOOL_PARAM:
                    o.addProperty(e.getKey(), p.getBoolParam());
                    break;
                case INT64_PARAM:
                    o.addProperty(e.getKey(), p.getInt64Param());
                    break;
                case STRING_PARAM:
                    o.addProperty(e.getKey(), p.getStringParam());
                    break;
                default:
                    break;
            }
        }
        return o;
    }

    private static JsonArray fromContents(String name, String datatype, InferTensorContents c) {
        JsonArray a = new JsonArray();
        switch (datatype.toUpperCase(Locale.ROOT)) {
            case "BOOL":
                c.getBoolContentsList().forEach(a::add);
                break;
            case "INT8":
            case "INT16":
            case "INT32":
                c.getIntContentsList().forEach(a::add);
                break;
            case "INT64":
                c.getInt64ContentsList().forEach(a::add);
                break;
            case "UINT8":
            case "UINT16":
            case "UINT32":
                c.getUintContentsList().forEach(v -> a.add(Integer.toUnsignedLong(v)));
                break;
            case "UINT64":
                c.getUint64ContentsList().forEach(v -> a.add(new JsonPrimitive(new java.math.BigInteger(Long.toUnsignedString(v)))));
                break;
            case "FP32":
                c.getFp32ContentsList().forEach(a::add);
                break;
            case "FP64":
                c.getFp64ContentsList().forEach(a::add);
                break;
            default:
                throw new IllegalArgumentException("input " + name + ": datatype " + datatype + " needs raw_input_contents "
                        + "(typed contents exist for BOOL, INT8..INT64, UINT8..UINT64, FP32, FP64, BYTES)");
        }
        return a;
    }

    private static JsonArray fromRaw(String name, String datatype, ByteString raw) {
        ByteBuffer b = raw.asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
        JsonArray a = new JsonArray();
        String dt = datatype.toUpperCase(Locale.ROOT);
        int size = elementSize(dt);
        if (size > 0 && b.remaining() % size != 0) {
            throw new IllegalArgumentException("input " + name + ": " + b.remaining() + " raw bytes is not a whole number of "
                    + dt + " elements (" + size + " bytes each)");
        }
        while (b.hasRemaining()) {
            switch (dt) {
                case "BOOL":
                    a.add(b.get() != 0);
                    break;
                case "INT8":
                    a.add(b.get());
                    break;
                case "UINT8":
                    a.add(b.get() & 0xff);
                    break;
                case "INT16":
                    a.add(b.getShort());
                    break;
                case "UINT16":
                    a.add(b.getShort() & 0xffff);
                    break;
                case "INT32":
                    a.add(b.getInt());
                    break;
                case "UINT32":
                    a.add(Integer.toUnsignedLong(b.getInt()));
                    break;
                case "INT64":
                    a.add(b.getLong());
                    break;
                case "UINT64":
                    a.add(new JsonPrimitive(new java.math.BigInteger(Long.toUnsignedString(b.getLong()))));
                    break;
                case "FP16":
                    a.add(halfToFloat(b.getShort()));
                    break;
                case "BF16":
                    a.add(Float.intBitsToFloat((b.getShort() & 0xffff) << 16));
                    break;
                case "FP32":
                    a.add(b.getFloat());
                    break;
                case "FP64":
                    a.add(b.getDouble());
                    break;
                default:
                    throw new IllegalArgumentException("input " + name + ": unknown datatype " + datatype);
            }
        }
        return a;
    }

    /** A raw BYTES tensor's elements: each a 4-byte little-endian length and its bytes. */
    private static List<byte[]> rawBytes(String name, ByteString raw) {
        ByteBuffer b = raw.asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
        List<byte[]> out = new java.util.ArrayList<>();
        while (b.hasRemaining()) {
            if (b.remaining() < 4) {
                throw new IllegalArgumentException("input " + name + ": truncated BYTES element length");
            }
            int n = b.getInt();
            if (n < 0 || n > b.remaining()) {
                throw new IllegalArgumentException("input " + name + ": BYTES element of " + n + " bytes exceeds the data");
            }
            byte[] e = new byte[n];
            b.get(e);
            out.add(e);
        }
        return out;
    }

    /**
     * BYTES elements as the REST JSON body carries them, text, so that the handler sees the same on
     * both routes; when one is not UTF-8, all go base64 and the input's parameter
     * {@value #BASE64_PARAMETER} tells the kservev2 envelope to decode them back into bytes.
     */
    static JsonArray bytesData(List<byte[]> elements, JsonObject input) {
        JsonArray a = new JsonArray();
        List<String> text = new java.util.ArrayList<>(elements.size());
        java.nio.charset.CharsetDecoder utf8 = StandardCharsets.UTF_8.newDecoder();
        for (byte[] e : elements) {
            try {
                text.add(utf8.decode(ByteBuffer.wrap(e)).toString());
            } catch (java.nio.charset.CharacterCodingException notText) {
                elements.forEach(x -> a.add(Base64.getEncoder().encodeToString(x)));
                JsonObject params = input.has("parameters") ? input.getAsJsonObject("parameters") : new JsonObject();
                params.addProperty(BASE64_PARAMETER, true);
                input.add("parameters", params);
                return a;
            }
        }
        text.forEach(a::add);
        return a;
    }

    static int elementSize(String dt) {
        switch (dt) {
            case "BOOL":
            case "INT8":
            case "UINT8":
                return 1;
            case "INT16":
            case "UINT16":
            case "FP16":
            case "BF16":
                return 2;
            case "INT32":
            case "UINT32":
            case "FP32":
                return 4;
            case "INT64":
            case "UINT64":
            case "FP64":
                return 8;
            default:
                return 0;
        }
    }

    /** IEEE 754 half precision → float (Float.float16ToFloat arrives only in Java 20). */
    static float halfToFloat(short h) {
        int bits = h & 0xffff;
        int sign = (bits & 0x8000) << 16;
        int exp = (bits >>> 10) & 0x1f;
        int mant = bits & 0x3ff;
        if (exp == 0x1f) {
            return Float.intBitsToFloat(sign | 0x7f800000 | (mant << 13));
        }
        if (exp == 0) {
            float v = mant / 1024f / 16384f;   // subnormal: mant * 2^-24
            return sign != 0 ? -v : v;
        }
        return Float.intBitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
    }

    /**
     * The handler's KServe v2 JSON answer → ModelInferResponse; a wrong shape throws
     * IllegalArgumentException. A request that sent raw_input_contents gets raw_output_contents (as
     * KServe's and Triton's servers answer; tritonclient reads only those), else typed contents.
     */
    static ModelInferResponse fromJson(String json, ModelInferRequest req) {
        JsonElement root = org.tserve.util.Json.parse(json);
        if (root.isJsonArray() && root.getAsJsonArray().size() == 1) {
            root = root.getAsJsonArray().get(0);
        }
        if (!root.isJsonObject() || !root.getAsJsonObject().has("outputs")
                || !root.getAsJsonObject().get("outputs").isJsonArray()) {
            throw new IllegalArgumentException("the handler's answer is not a KServe v2 response with \"outputs\" "
                    + "(set service_envelope=kservev2)");
        }
        JsonObject o = root.getAsJsonObject();
        ModelInferResponse.Builder r = ModelInferResponse.newBuilder()
            .setModelName(text(o, "model_name", req.getModelName()))
            .setModelVersion(text(o, "model_version", req.getModelVersion()))
            .setId(text(o, "id", req.getId()));
        boolean raw = req.getRawInputContentsCount() > 0;
        for (JsonElement e : o.getAsJsonArray("outputs")) {
            JsonObject t = e.getAsJsonObject();
            String dt = text(t, "datatype", "BYTES");
            ModelInferResponse.InferOutputTensor.Builder out = ModelInferResponse.InferOutputTensor.newBuilder()
                .setName(text(t, "name", "")).setDatatype(dt);
            if (t.has("shape") && t.get("shape").isJsonArray()) {
                for (JsonElement s : t.getAsJsonArray("shape")) {
                    out.addShape(s.getAsLong());
                }
            }
            List<JsonElement> flat = new java.util.ArrayList<>();
            flatten(t.get("data"), flat);
            if (raw) {
                r.addRawOutputContents(RawOutputs.encode(dt, flat, out.getName()));
            } else {
                out.setContents(contents(dt, flat, out.getName()));
            }
            r.addOutputs(out);
        }
        return r.build();
    }

    private static String text(JsonObject o, String key, String fallback) {
        JsonElement e = o.get(key);
        return e == null || e.isJsonNull() ? fallback : e.getAsString();
    }

    private static void flatten(JsonElement e, List<JsonElement> out) {
        if (e == null || e.isJsonNull()) {
            return;
        }
        if (e.isJsonArray()) {
            for (JsonElement x : e.getAsJsonArray()) {
                flatten(x, out);
            }
        } else {
            out.add(e);
        }
    }

    private static InferTensorContents contents(String datatype, List<JsonElement> data, String name) {
        InferTensorContents.Builder c = InferTensorContents.newBuilder();
        for (JsonElement v : data) {
            switch (datatype.toUpperCase(Locale.ROOT)) {
                case "BOOL":
                    c.addBoolContents(v.getAsBoolean());
                    break;
                case "INT8":
                case "INT16":
                case "INT32":
                    c.addIntContents(v.getAsInt());
                    break;
                case "INT64":
                    c.addInt64Contents(v.getAsLong());
                    break;
                case "UINT8":
                case "UINT16":
                case "UINT32":
                    c.addUintContents((int) v.getAsLong());
                    break;
                case "UINT64":
                    c.addUint64Contents(v.getAsBigInteger().longValue());
                    break;
                case "FP16":
                case "BF16":
                case "FP32":
                    c.addFp32Contents(v.getAsFloat());
                    break;
                case "FP64":
                    c.addFp64Contents(v.getAsDouble());
                    break;
                default:
                    c.addBytesContents(v.isJsonPrimitive() ? ByteString.copyFrom(v.getAsString(), StandardCharsets.UTF_8)
                        : ByteString.copyFrom(v.toString(), StandardCharsets.UTF_8));
                    break;
            }
        }
        return c.build();
    }
}

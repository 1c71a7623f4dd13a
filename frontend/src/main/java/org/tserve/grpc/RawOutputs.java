package org.tserve.grpc;

import com.google.gson.JsonElement;
import com.google.protobuf.ByteString;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Locale;

/**
 * An output tensor's JSON elements as the Open Inference Protocol's {@code raw_output_contents}:
 * little-endian, row-major; a BYTES element is a 4-byte little-endian length and its UTF-8 bytes.
 */
final class RawOutputs {
    private RawOutputs() {
    }

    static ByteString encode(String datatype, List<JsonElement> data, String name) {
        String dt = datatype.toUpperCase(Locale.ROOT);
        if (dt.equals("BYTES")) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            for (JsonElement v : data) {
                byte[] e = (v.isJsonPrimitive() ? v.getAsString() : v.toString()).getBytes(StandardCharsets.UTF_8);
                out.writeBytes(ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(e.length).array());
                out.writeBytes(e);
            }
            return ByteString.copyFrom(out.toByteArray());
        }
        int size = size(dt, name);
        ByteBuffer b = ByteBuffer.allocate(size * data.size()).order(ByteOrder.LITTLE_ENDIAN);
        for (JsonElement v : data) {
            switch (dt) {
                case "BOOL":
                    b.put((byte) (v.getAsBoolean() ? 1 : 0));
                    break;
                case "INT8":
                case "UINT8":
                    b.put((byte) v.getAsLong());
                    break;
                case "INT16":
                case "UINT16":
                    b.putShort((short) v.getAsLong());
                    break;
                case "INT32":
                case "UINT32":
                    b.putInt((int) v.getAsLong());
                    break;
                case "INT64":
                    b.putLong(v.getAsLong());
                    break;
                case "UINT64":
                    b.putLong(v.getAsBigInteger().longValue());
                    break;
                case "FP16":
                    b.putShort(floatToHalf(v.getAsFloat()));
                    break;
                case "BF16":
                    b.putShort((short) (Float.floatToIntBits(v.getAsFloat()) >>> 16));
                    break;
                case "FP32":
                    b.putFloat(v.getAsFloat());
                    break;
                default:   // FP64
                    b.putDouble(v.getAsDouble());
                    break;
            }
        }
        return ByteString.copyFrom(b.array());
    }

    private static int size(String dt, String name) {
        int size = OipTensors.elementSize(dt);
        if (size == 0) {
            throw new IllegalArgumentException("output " + name + " has the unknown datatype " + dt);
        }
        return size;
    }

    /** float → IEEE 754 half precision, rounding to nearest (Float.floatToFloat16 arrives only in Java 20). */
    static short floatToHalf(float f) {
        int bits = Float.floatToIntBits(f);
        int sign = (bits >>> 16) & 0x8000;
        int exp = ((bits >>> 23) & 0xff) - 127 + 15;
        int mant = bits & 0x7fffff;
        if (((bits >>> 23) & 0xff) == 0xff) {
            return (short) (sign | 0x7c00 | (mant != 0 ? 0x200 : 0));   // inf, nan
        }
        if (exp >= 0x1f) {
            return (short) (sign | 0x7c00);   // overflow → inf
        }
        if (exp <= 0) {
            if (exp < -10) {
                return (short) sign;
            }
            mant |= 0x800000;
            int shift = 14 - exp;
            return (short) (sign | ((mant + (1 << (shift - 1))) >> shift));
        }
        return (short) (sign + (exp << 10) + ((mant + 0x1000) >> 13));
    }
}

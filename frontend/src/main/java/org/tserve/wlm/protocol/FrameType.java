package org.tserve.wlm.protocol;

/** Frame type bytes of docs/protocol.md. */
public final class FrameType {
    public static final int LOAD = 0x01;
    public static final int INFERENCE = 0x02;
    public static final int PING = 0x03;
    public static final int STOP = 0x04;
    /** Stop work on one request (its client went away); body: the request id. */
    public static final int CANCEL = 0x05;
    /** A stateful model's sequence closed: the handler may drop its state; body: the sequence id. */
    public static final int SEQUENCE_END = 0x06;
    public static final int LOADED = 0x11;
    public static final int RESULT = 0x12;
    public static final int CHUNK = 0x13;
    public static final int PONG = 0x14;
    public static final int METRICS = 0x15;
    public static final int ERROR = 0x1F;

    private FrameType() {
    }

    /** The protocol name of a type byte (for logs). */
    public static String name(int type) {
        switch (type) {
            case LOAD: return "LOAD";
            case INFERENCE: return "INFERENCE";
            case PING: return "PING";
            case STOP: return "STOP";
            case CANCEL: return "CANCEL";
            case SEQUENCE_END: return "SEQUENCE_END";
            case LOADED: return "LOADED";
            case RESULT: return "RESULT";
            case CHUNK: return "CHUNK";
            case PONG: return "PONG";
            case METRICS: return "METRICS";
            case ERROR: return "ERROR";
            default: return String.format("0x%02x", type);
        }
    }
}

package org.tserve.wlm.protocol;

import java.nio.charset.StandardCharsets;

/** One protocol frame: type, batch id and the raw body. */
public final class Frame {
    public final int type;
    public final long batchId;
    public final byte[] body;

    public Frame(int type, long batchId, byte[] body) {
        this.type = type;
        this.batchId = batchId;
        this.body = body;
    }

    /** The body as UTF-8 text (for json bodies). */
    public String text() {
        return new String(body, StandardCharsets.UTF_8);
    }

    @Override
    public String toString() {
        return FrameType.name(type) + "(batch " + batchId + ", " + body.length + " bytes)";
    }
}

package org.tserve.wlm.protocol;

import java.io.IOException;

/** A frame that breaks docs/protocol.md (bad length, truncated body, unknown type). */
public class ProtocolException extends IOException {
    private static final long serialVersionUID = 1L;

    public ProtocolException(String message) {
        super(message);
    }
}

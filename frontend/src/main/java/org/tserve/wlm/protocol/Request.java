package org.tserve.wlm.protocol;

import java.util.List;

/** One request of an INFERENCE batch as it goes on the wire. */
public record Request(String requestId, List<Header> headers, List<Part> parts) {
}

package org.tserve.wlm.protocol;

import java.util.List;
import org.tserve.wlm.api.Header;
import org.tserve.wlm.api.Part;

/** One request of an INFERENCE batch as it goes on the wire. */
public record Request(String requestId, List<Header> headers, List<Part> parts) {
}

package org.tserve.wlm.api;

import java.util.List;

/**
 * One answer to one request (an entry of a RESULT or CHUNK frame): HTTP status, message (reason
 * phrase, or the error text when status is 400 or more), content type (empty = none), headers
 * and body.
 */
public record Response(String requestId, int status, String message, String contentType, List<Header> headers,
                       byte[] body) {
    /** The first header with this name (case-insensitive), or null. */
    public String header(String name) {
        for (Header h : headers) {
            if (h.name().equalsIgnoreCase(name)) {
                return h.value();
            }
        }
        return null;
    }
}

package org.tserve.wlm.protocol;

/** One input of a request: {@code body}, a multipart field or a form field. */
public record Part(String name, String contentType, byte[] value) {
}

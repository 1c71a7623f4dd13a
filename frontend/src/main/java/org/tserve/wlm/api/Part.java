package org.tserve.wlm.api;

/** One input of a request: {@code body}, a multipart field or a form field. */
public record Part(String name, String contentType, byte[] value) {
}

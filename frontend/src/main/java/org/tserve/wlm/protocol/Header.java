package org.tserve.wlm.protocol;

/** One name/value header (names keep their case; duplicates are allowed). */
public record Header(String name, String value) {
}

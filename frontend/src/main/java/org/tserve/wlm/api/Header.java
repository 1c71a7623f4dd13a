package org.tserve.wlm.api;

/** One name/value header (names keep their case; duplicates are allowed). */
public record Header(String name, String value) {
}

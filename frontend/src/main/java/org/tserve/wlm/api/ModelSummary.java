package org.tserve.wlm.api;

/** A registered model version in brief: name, version and when it was registered (epoch ms). */
public record ModelSummary(String name, String version, long registeredAtMillis) {
}

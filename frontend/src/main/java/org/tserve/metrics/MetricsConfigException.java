package org.tserve.metrics;

/** metrics.yaml cannot be read or is malformed; the message names the file, the entry and the fix. */
public final class MetricsConfigException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public MetricsConfigException(String message) {
        super(message);
    }
}

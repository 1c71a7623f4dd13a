package org.tserve.util;

/**
 * A log configuration that cannot be used (a {@code --log-config} file log4j2 refuses, an unknown
 * {@code log_format}); the message names it and the fix. Its own type so that {@code util} needs
 * nothing of {@code config}.
 */
public class LogConfigException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public LogConfigException(String message) {
        super(message);
    }
}

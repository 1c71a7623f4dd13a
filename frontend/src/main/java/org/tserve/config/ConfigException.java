package org.tserve.config;

/** A configuration value that is missing, unknown or of the wrong type; the message names it. */
public class ConfigException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public ConfigException(String message) {
        super(message);
    }
}

package org.tserve.config;

import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Checks and expands config.properties values: {@code $$ENV$$} references, each key's type, and
 * the value checks keys declare in {@link ConfigKeys} (their messages name the key).
 */
final class ValueChecks {
    private static final Pattern ENV_REF = Pattern.compile("\\$\\$([A-Za-z_][A-Za-z0-9_]*)\\$\\$");
    /** Whitespace, '#', then text: a comment someone meant to end the line with. */
    private static final Pattern INLINE_COMMENT = Pattern.compile("\\s#\\s*\\S.*$");

    /**
     * The part of a raw value that looks like an inline comment ({@code "change-me   # optional"}
     * gives {@code "# optional"}), or null. Only that part is returned: the value may be a secret.
     */
    static String inlineComment(String raw) {
        Matcher m = INLINE_COMMENT.matcher(raw);
        return m.find() ? m.group().trim() : null;
    }


    static final ConfigKeys.Check POSITIVE = (k, v) -> {
        if (Integer.parseInt(v) <= 0) {
            throw new ConfigException("Configuration key '" + k + "' must be a positive integer, got " + v);
        }
    };
    static final ConfigKeys.Check NON_NEGATIVE = (k, v) -> {
        if (Integer.parseInt(v) < 0) {
            throw new ConfigException("Configuration key '" + k + "' must not be negative, got " + v);
        }
    };
    static final ConfigKeys.Check AT_LEAST_ONE = (k, v) -> {
        if (Integer.parseInt(v) < 1) {
            throw new ConfigException("Configuration key '" + k + "' must be at least 1, got " + v);
        }
    };
    /** A long limit where 0 turns the limit off. */
    static final ConfigKeys.Check NO_LIMIT_IF_ZERO = (k, v) -> {
        if (Long.parseLong(v) < 0) {
            throw new ConfigException("Configuration key '" + k + "' must not be negative (0 = no limit), got " + v);
        }
    };
    static final ConfigKeys.Check SOCKET_TYPE = oneOf("unix or tcp", "unix", "tcp");
    static final ConfigKeys.Check METRICS_MODE = oneOf("log, prometheus or legacy", "log", "prometheus", "legacy");
    static final ConfigKeys.Check ADDRESS = ConfigManager::parseAddress;
    static final ConfigKeys.Check MODELS = (k, v) -> {
        if (!v.isEmpty()) {
            ModelsJson.parse(v);
        }
    };
    static final ConfigKeys.Check MODEL_SNAPSHOT = (k, v) -> {
        if (!v.isEmpty()) {
            ModelSnapshot.parse(v);
        }
    };
    static final ConfigKeys.Check URL_PATTERNS = (k, v) -> {
        for (String re : ConfigManager.splitList(v)) {
            try {
                Pattern.compile(re);
            } catch (RuntimeException e) {
                throw new ConfigException("Invalid regular expression '" + re + "' in " + k + ": " + e.getMessage());
            }
        }
    };

    private ValueChecks() {
    }

    private static ConfigKeys.Check oneOf(String expected, String... allowed) {
        return (k, v) -> {
            if (!java.util.Arrays.asList(allowed).contains(v)) {
                throw new ConfigException("Configuration key '" + k + "' must be " + expected + ", got " + v);
            }
        };
    }

    /** Replaces {@code $$NAME$$} with the environment variable NAME; an unset one is an error naming the key. */
    static String substituteEnv(String key, String value, Map<String, String> env) {
        Matcher m = ENV_REF.matcher(value);
        StringBuilder sb = new StringBuilder();
        while (m.find()) {
            String v = env.get(m.group(1));
            if (v == null) {
                throw new ConfigException("Invalid configuration: '" + key + "' refers to environment variable "
                        + m.group(1) + ", which is not set");
            }
            m.appendReplacement(sb, Matcher.quoteReplacement(v));
        }
        m.appendTail(sb);
        return sb.toString();
    }

    /**
     * A boolean key's value must be true or false (any case); under {@code compatibility=torchserve-0.12}
     * anything else is false, as TorchServe reads it.
     */
    static void checkBool(String name, String value, Compatibility policy) {
        ConfigKeys.Key key = ConfigKeys.get(name);
        if (key == null || value == null || key.type != ConfigKeys.Type.BOOL || policy.lenientBooleans()) {
            return;
        }
        String v = value.trim();
        if (!v.equalsIgnoreCase("true") && !v.equalsIgnoreCase("false")) {
            throw new ConfigException("Invalid value '" + value + "' for configuration key '" + name + "': expected true or false");
        }
    }

    /** Throws a ConfigException naming the key, its source and the expected type when the value does not parse. */
    static void checkType(String name, String value, String source) {
        ConfigKeys.Key key = ConfigKeys.get(name);
        if (key == null || value == null) {
            return;
        }
        String v = value.trim();
        try {
            switch (key.type) {
                case INT:
                    Integer.parseInt(v);
                    break;
                case LONG:
                    Long.parseLong(v);
                    break;
                case DOUBLE:
                    Double.parseDouble(v);
                    break;
                case BOOL:   // checkBool, once the compatibility policy is known
                    break;
                default:
                    break;
            }
        } catch (NumberFormatException e) {
            String want = key.type == ConfigKeys.Type.DOUBLE ? "a number" : "an integer";
            throw new ConfigException("Invalid value '" + value + "' for configuration key '" + name + "' (from "
                    + source + "): expected " + want);
        }
    }
}

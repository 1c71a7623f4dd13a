package org.tserve.config;

import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Checks and expands config.properties values: {@code $$ENV$$} references and each key's type. */
final class ValueChecks {
    private static final Pattern ENV_REF = Pattern.compile("\\$\\$([A-Za-z_][A-Za-z0-9_]*)\\$\\$");

    private ValueChecks() {
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
                case BOOL:
                    if (!v.equalsIgnoreCase("true") && !v.equalsIgnoreCase("false")) {
                        throw new NumberFormatException();
                    }
                    break;
                default:
                    break;
            }
        } catch (NumberFormatException e) {
            String want = key.type == ConfigKeys.Type.BOOL ? "true or false"
                    : key.type == ConfigKeys.Type.DOUBLE ? "a number" : "an integer";
            throw new ConfigException("Invalid value '" + value + "' for configuration key '" + name + "' (from "
                    + source + "): expected " + want);
        }
    }
}

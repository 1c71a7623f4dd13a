package org.tserve.util;

import com.google.gson.JsonElement;
import com.google.gson.JsonParseException;
import com.google.gson.JsonParser;

/**
 * JSON parsing for text the server does not control (request bodies, handler answers, archive
 * manifests): nesting deeper than {@link #MAX_DEPTH} is refused before Gson's recursive parser
 * could exhaust the thread's stack.
 */
public final class Json {
    /** Deepest nesting of arrays and objects accepted. */
    public static final int MAX_DEPTH = 200;

    private Json() {
    }

    /** {@link JsonParser#parseString}, refusing nesting deeper than {@link #MAX_DEPTH} (JsonParseException). */
    public static JsonElement parse(String text) {
        int depth = depth(text);
        if (depth > MAX_DEPTH) {
            throw new JsonParseException("JSON nested deeper than " + MAX_DEPTH + " levels");
        }
        return JsonParser.parseString(text);
    }

    /** The deepest nesting of {@code [} and <code>{</code> outside strings (stops counting past the limit). */
    static int depth(String text) {
        int depth = 0;
        int max = 0;
        boolean inString = false;
        for (int i = 0, n = text.length(); i < n; i++) {
            char c = text.charAt(i);
            if (inString) {
                if (c == '\\') {
                    i++;
                } else if (c == '"') {
                    inString = false;
                }
            } else if (c == '"') {
                inString = true;
            } else if (c == '[' || c == '{') {
                depth++;
                if (depth > max) {
                    max = depth;
                    if (max > MAX_DEPTH) {
                        return max;
                    }
                }
            } else if (c == ']' || c == '}') {
                depth--;
            }
        }
        return max;
    }
}

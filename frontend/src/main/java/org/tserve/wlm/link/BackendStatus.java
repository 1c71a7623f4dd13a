package org.tserve.wlm.link;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

/** The status and message of a worker's LOADED or ERROR answer ({@code {"status": .., "message": ..}}). */
public record BackendStatus(int status, String message, boolean readable) {
    /** The {@code pid} of a LOADED answer, or -1. */
    public static long pidOf(String json) {
        try {
            JsonObject r = JsonParser.parseString(json).getAsJsonObject();
            return r.has("pid") ? r.get("pid").getAsLong() : -1;
        } catch (RuntimeException e) {
            return -1;
        }
    }

    /** Parses {@code json}; an unreadable answer is a 500 whose message is the raw text. */
    public static BackendStatus parse(String json) {
        try {
            JsonObject r = JsonParser.parseString(json).getAsJsonObject();
            return new BackendStatus(r.has("status") ? r.get("status").getAsInt() : 500,
                    r.has("message") ? r.get("message").getAsString() : json, true);
        } catch (RuntimeException e) {
            return new BackendStatus(500, json, false);
        }
    }
}

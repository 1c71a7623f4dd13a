package org.tserve.wlm;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

/** The status and message of a worker's LOADED or ERROR answer ({@code {"status": .., "message": ..}}). */
record BackendStatus(int status, String message, boolean readable) {
    /** Parses {@code json}; an unreadable answer is a 500 whose message is the raw text. */
    static BackendStatus parse(String json) {
        try {
            JsonObject r = JsonParser.parseString(json).getAsJsonObject();
            return new BackendStatus(r.has("status") ? r.get("status").getAsInt() : 500,
                    r.has("message") ? r.get("message").getAsString() : json, true);
        } catch (RuntimeException e) {
            return new BackendStatus(500, json, false);
        }
    }
}

package org.tserve.util;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import com.google.gson.JsonParseException;
import org.junit.Test;

public class JsonTest {
    @Test
    public void depthIgnoresBracketsInStrings() {
        assertEquals(1, Json.depth("{\"a\": \"[[[[{{{\\\"[[\"}"));
        assertEquals(3, Json.depth("[{\"a\": [1]}, []]"));
        assertEquals(0, Json.depth("\"x\""));
    }

    @Test
    public void deepNestingIsRefusedAndShallowParsed() {
        String ok = "[".repeat(Json.MAX_DEPTH) + "]".repeat(Json.MAX_DEPTH);
        assertTrue(Json.parse(ok).isJsonArray());
        String deep = "{\"a\":[" + "[".repeat(100_000) + "]".repeat(100_000) + "]}";
        try {
            Json.parse(deep);
            fail();
        } catch (JsonParseException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("nested deeper than " + Json.MAX_DEPTH));
        }
    }
}

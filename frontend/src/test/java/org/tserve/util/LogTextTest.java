package org.tserve.util;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import org.junit.Test;

public class LogTextTest {
    @Test
    public void quoteEscapesAndShortens() {
        assertEquals("\"a\\\"b\\\\c\\nd\\u0000\"", LogText.quote("a\"b\\c\nd\0"));
        String q = LogText.quote("y".repeat(8192));
        assertTrue(q, q.endsWith("\"...(8192 chars)"));
        assertEquals(LogText.MAX_QUOTED + 2 + "...(8192 chars)".length(), q.length());
        assertEquals("plain", LogText.oneLine("plain"));
    }
}

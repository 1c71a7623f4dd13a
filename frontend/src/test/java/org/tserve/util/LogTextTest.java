package org.tserve.util;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.util.logging.Level;
import java.util.logging.LogRecord;
import org.junit.Test;

public class LogTextTest {
    /** Every character some reader takes as a line break (Python's str.splitlines, Unicode). */
    private static final String BREAKS = "\n\r\u000b\u000c\u001c\u001d\u001e\u0085\u2028\u2029";

    @Test
    public void aLogLineIsOneLineWhateverTheMessageHolds() {
        String msg = "Model not found: x" + BREAKS + "2026-01-01 [INFO] forged";
        String line = new Logging.LineFormatter(false).format(new LogRecord(Level.INFO, msg));
        String body = line.substring(0, line.length() - System.lineSeparator().length());
        for (char c : BREAKS.toCharArray()) {
            assertFalse("line break U+" + Integer.toHexString(c) + " in " + body, body.indexOf(c) >= 0);
        }
        assertTrue(body, body.endsWith("x  \\u000b\\u000c\\u001c\\u001d\\u001e\\u0085\\u2028\\u20292026-01-01 [INFO] forged"));
    }

    @Test
    public void quoteEscapesAndShortens() {
        assertEquals("\"a\\\"b\\\\c\\nd\\u0000\"", LogText.quote("a\"b\\c\nd\0"));
        String q = LogText.quote("y".repeat(8192));
        assertTrue(q, q.endsWith("\"...(8192 chars)"));
        assertEquals(LogText.MAX_QUOTED + 2 + "...(8192 chars)".length(), q.length());
        assertEquals("plain", LogText.oneLine("plain"));
    }
}

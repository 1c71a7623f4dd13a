package org.tserve.util;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.List;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;

public class AccessLogTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    @Test
    public void requestLinesAndLoggedLinesKeepTheFormatAndOrder() throws Exception {
        File f = new File(tmp.getRoot(), "access_log.log");
        AccessLog a = new AccessLog(f, new Logging.LineFormatter(true));
        a.request("127.0.0.1", "POST", "/predictions/echo?x=1\r\n", "HTTP/1.1", 200, 3);
        a.publish(new LogRecord(Level.INFO, "10.0.0.1 \"PUT /big HTTP/1.1\" 413 0ms"));
        a.request("::1", "GET", "/ping", "HTTP/1.0", 404, 0);
        a.close();
        a.request("127.0.0.1", "GET", "/ping", "HTTP/1.1", 200, 0);   // after close: dropped
        List<String> lines = Files.readAllLines(f.toPath(), StandardCharsets.UTF_8);
        assertEquals(3, lines.size());
        String time = "\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d,\\d{3} ";
        assertTrue(lines.get(0), lines.get(0).matches(time + ".*"));
        assertEquals("127.0.0.1 \"POST /predictions/echo?x=1   HTTP/1.1\" 200 3ms", lines.get(0).substring(24));
        assertEquals("10.0.0.1 \"PUT /big HTTP/1.1\" 413 0ms", lines.get(1).substring(24));
        assertEquals("::1 \"GET /ping HTTP/1.0\" 404 0ms", lines.get(2).substring(24));
    }
}

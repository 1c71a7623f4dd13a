package org.tserve.util;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.util.List;
import org.junit.Rule;
import org.junit.Test;

public class OneLineMessageTest {
    /** Every character some reader takes as a line break (Python's str.splitlines, Unicode). */
    private static final String BREAKS = "\n\r\u000b\u000c\u001c\u001d\u001e\u0085\u2028\u2029";

    @Rule
    public LogCapture server = new LogCapture(Logging.SERVER + ".util.OneLineMessageTest", "%c %m");

    @Test
    public void aServerLogLineIsOneLineWhateverTheMessageHolds() {
        Logging.logger(OneLineMessageTest.class).info("Model not found: x" + BREAKS + "2026-01-01 [INFO] forged");
        List<String> lines = server.lines();
        assertEquals(1, lines.size());
        String line = lines.get(0);
        for (char c : BREAKS.toCharArray()) {
            assertFalse("line break U+" + Integer.toHexString(c) + " in " + line, line.indexOf(c) >= 0);
        }
        assertTrue(line, line.startsWith("org.pytorch.serve.util.OneLineMessageTest Model not found: x  "));
        assertTrue(line, line.endsWith("x  \\u000b\\u000c\\u001c\\u001d\\u001e\\u0085\\u2028\\u20292026-01-01 [INFO] forged"));
    }

    @Test
    public void tserveClassesLogUnderTorchServesPackage() {
        assertEquals("org.pytorch.serve.wlm.WorkerThread", Logging.serverLoggerName("org.tserve.wlm.WorkerThread"));
        assertEquals("org.pytorch.serve.wlm.WorkerThread",
                Logging.serverLoggerName("org.tserve.wlm.supervision.WorkerThread"));
        assertEquals("org.pytorch.serve.wlm.protocol.Codec", Logging.serverLoggerName("org.tserve.wlm.protocol.Codec"));
        assertEquals("org.pytorch.serve.wlm.BackendLink", Logging.serverLoggerName("org.tserve.wlm.link.BackendLink"));
        assertEquals("org.pytorch.serve", Logging.serverLoggerName("org.tserve"));
        assertEquals("org.tservex.A", Logging.serverLoggerName("org.tservex.A"));
        assertEquals("io.grpc.Server", Logging.serverLoggerName("io.grpc.Server"));
    }

    @Test
    public void parametersAreFormattedThenKeptOnOneLine() {
        assertEquals("a b\\u0007 c", OneLineMessage.FACTORY.newMessage("a {} c", "b\u0007").getFormattedMessage());
        StringBuilder sb = new StringBuilder();
        new OneLineMessage("x\ny").formatTo(sb);
        assertEquals("x y", sb.toString());
    }
}

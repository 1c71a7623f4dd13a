package org.tserve.util;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;

import java.util.List;
import org.apache.logging.log4j.ThreadContext;
import org.junit.Rule;
import org.junit.Test;

public class AccessLogTest {
    @Rule
    public LogCapture access = new LogCapture(Logging.ACCESS_LOG, "%m|%X{requestId}|%X{model}");

    @Test
    public void oneLinePerRequestWithRequestIdAndModelInTheContext() {
        AccessLog.request("/127.0.0.1:54321", "POST", "/predictions/echo?x=1\r\n\u001b[2J", "HTTP/1.1", 200, 3, "r-1", "echo");
        AccessLog.request("/0:0:0:0:0:0:0:1:40000", "GET", "/ping", "HTTP/1.0", 404, 0, null, null);
        List<String> lines = access.lines();
        assertEquals(2, lines.size());
        assertEquals("/127.0.0.1:54321 \"POST /predictions/echo?x=1  \\u001b[2J HTTP/1.1\" 200 3|r-1|echo", lines.get(0));
        assertEquals("/0:0:0:0:0:0:0:1:40000 \"GET /ping HTTP/1.0\" 404 0||", lines.get(1));
        assertNull(ThreadContext.get(Logging.REQUEST_ID));   // the request's values do not stick to the thread
        assertNull(ThreadContext.get(Logging.MODEL));
    }

    @Test
    public void clientIsTheSocketAddressAsTorchServePrintsIt() {
        assertEquals("/127.0.0.1:54321", AccessLog.client(new java.net.InetSocketAddress("127.0.0.1", 54321)));
        assertEquals("127.0.0.1", AccessLog.client(null));   // a Unix socket: TorchServe's stand-in
    }
}

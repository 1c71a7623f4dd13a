package org.tserve.util;

import org.apache.logging.log4j.Logger;
import org.apache.logging.log4j.ThreadContext;

/**
 * The {@code ACCESS_LOG} logger's line, one per answered request, as TorchServe 0.12 writes it
 * ({@code Session.toString}): {@code /<ip>:<port> "<METHOD> <uri> <protocol>" <status> <ms>} (the
 * layout adds {@code <time> - }). The request id and the model ride along
 * as ThreadContext values ({@code requestId}, {@code model}) for layouts that print them (the JSON
 * config, or {@code %X{requestId}} in a pattern). Nothing is formatted when ACCESS_LOG is off.
 */
public final class AccessLog {
    private static final Logger LOG = Logging.named(Logging.ACCESS_LOG);

    private AccessLog() {
    }

    /**
     * The client as TorchServe prints it: the socket address's {@code toString()},
     * {@code /127.0.0.1:54321}; {@code 127.0.0.1} when there is none (a Unix socket), as TorchServe.
     */
    public static String client(java.net.SocketAddress a) {
        return a instanceof java.net.InetSocketAddress ? a.toString() : "127.0.0.1";
    }

    /** True when access lines are written (ACCESS_LOG at INFO or finer). */
    public static boolean enabled() {
        return LOG.isInfoEnabled();
    }

    /** Logs one request; {@code requestId} and {@code model} may be null. */
    public static void request(String client, String method, String uri, String protocol, int status, long millis,
                               String requestId, String model) {
        if (!LOG.isInfoEnabled()) {
            return;
        }
        StringBuilder sb = new StringBuilder(64 + uri.length());
        sb.append(client).append(" \"").append(method).append(' ').append(uri).append(' ').append(protocol)
                .append("\" ").append(status).append(' ').append(millis);
        if (requestId != null) {
            ThreadContext.put(Logging.REQUEST_ID, requestId);
        }
        if (model != null) {
            ThreadContext.put(Logging.MODEL, model);
        }
        try {
            LOG.info(sb.toString());   // kept on one line by the logger's message factory
        } finally {
            if (requestId != null) {
                ThreadContext.remove(Logging.REQUEST_ID);
            }
            if (model != null) {
                ThreadContext.remove(Logging.MODEL);
            }
        }
    }
}

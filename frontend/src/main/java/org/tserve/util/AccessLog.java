package org.tserve.util;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.logging.ErrorManager;
import java.util.logging.Formatter;
import java.util.logging.Handler;
import java.util.logging.LogRecord;

/**
 * {@code access_log.log}: one line per request, {@code <time> <client> "<METHOD> <uri> <protocol>"
 * <status> <ms>ms}. Lines are collected in memory and written every {@link #FLUSH_MILLIS} ms (and
 * at shutdown): a write per request is too many on the event loop. The request path calls
 * {@link #request} directly, which formats into the buffer without a LogRecord; it is also a
 * JUL handler of the {@code ACCESS_LOG} logger for the rare lines logged from elsewhere.
 */
public final class AccessLog extends Handler {
    /** How long an access-log line may wait in the buffer. */
    static final long FLUSH_MILLIS = 200;
    private static final int BUFFER_CHARS = 1 << 16;
    private static final String EOL = System.lineSeparator();

    private final OutputStream out;
    private final StringBuilder pending = new StringBuilder(BUFFER_CHARS + 512);
    private boolean closed;

    AccessLog(File file, Formatter f) throws IOException {
        this.out = new FileOutputStream(file, true);
        setFormatter(f);
        ScheduledExecutorService flusher = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "access-log-flush");
            t.setDaemon(true);
            return t;
        });
        flusher.scheduleWithFixedDelay(this::flush, FLUSH_MILLIS, FLUSH_MILLIS, TimeUnit.MILLISECONDS);
    }

    /** The line of one answered request. */
    public synchronized void request(String client, String method, String uri, String protocol, int status, long millis) {
        if (closed) {
            return;
        }
        StringBuilder sb = LogTime.appendNow(pending).append(' ');
        oneLine(sb, client).append(" \"");
        oneLine(sb, method).append(' ');
        oneLine(sb, uri).append(' ');
        oneLine(sb, protocol).append("\" ").append(status).append(' ').append(millis).append("ms").append(EOL);
        drainIfFull();
    }

    /** Appends {@code s} on one line, as the line formatter does. */
    private static StringBuilder oneLine(StringBuilder sb, String s) {
        return LogText.appendOneLine(sb, s);
    }

    @Override
    public synchronized void publish(LogRecord record) {
        if (closed || !isLoggable(record)) {
            return;
        }
        pending.append(getFormatter().format(record));
        drainIfFull();
    }

    private void drainIfFull() {
        if (pending.length() >= BUFFER_CHARS) {
            flush();
        }
    }

    @Override
    public synchronized void flush() {
        if (pending.length() == 0) {
            return;
        }
        try {
            out.write(pending.toString().getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            reportError("cannot write the access log", e, ErrorManager.WRITE_FAILURE);
        }
        pending.setLength(0);
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        flush();
        closed = true;
        try {
            out.close();
        } catch (IOException e) {
            reportError("cannot close the access log", e, ErrorManager.CLOSE_FAILURE);
        }
    }
}

package org.tserve.metrics;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.tserve.util.LogTime;

/**
 * Appends metric log lines to one file ({@code ts_metrics.log} or {@code model_metrics.log}).
 * Several lines are written per request, so they are collected in memory and written every
 * {@link #FLUSH_MILLIS} ms (and on close, or when {@link #BUFFER_CHARS} are pending) rather than
 * one write per line.
 */
public final class MetricLogSink implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger(MetricLogSink.class.getName());
    static final long FLUSH_MILLIS = 500;
    private static final int BUFFER_CHARS = 1 << 16;
    private static final ScheduledExecutorService FLUSHER = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "metric-log-flush");
        t.setDaemon(true);
        return t;
    });

    private final File file;
    private final StringBuilder pending = new StringBuilder(BUFFER_CHARS + 512);
    private OutputStream out;
    private boolean failed;
    private final ScheduledFuture<?> flushing;

    public MetricLogSink(File file) {
        this.file = file;
        this.flushing = FLUSHER.scheduleWithFixedDelay(this::flush, FLUSH_MILLIS, FLUSH_MILLIS, TimeUnit.MILLISECONDS);
    }

    public File file() {
        return file;
    }

    /** Writes {@code <time> - <line>}; an unwritable file is reported once and then skipped. */
    public synchronized void write(String line) {
        if (failed) {
            return;
        }
        LogTime.appendNow(pending).append(" - ").append(line).append('\n');
        drainIfFull();
    }

    /**
     * Writes {@code <time> - <head><value><dimensions>,timestamp:<epoch seconds>} where the value
     * is {@code n / 10^scale} as Java prints a double: the frontend's line, from parts that the
     * registry formats once per metric and model.
     */
    synchronized void write(String head, long n, int scale, String dimensions) {
        if (failed) {
            return;
        }
        long now = System.currentTimeMillis();
        LogTime.append(pending, now).append(" - ").append(head);
        MetricValue.appendScaled(pending, n, scale).append(dimensions).append(",timestamp:").append(now / 1000).append('\n');
        drainIfFull();
    }

    private void drainIfFull() {
        if (pending.length() >= BUFFER_CHARS) {
            drain();
        }
    }

    /** Writes the pending lines to the file (opening it on first use). */
    private void drain() {
        if (pending.length() == 0 || failed) {
            return;
        }
        try {
            if (out == null) {
                File dir = file.getAbsoluteFile().getParentFile();
                if (dir != null && !dir.isDirectory() && !dir.mkdirs()) {
                    throw new IOException("cannot create directory " + dir);
                }
                out = new FileOutputStream(file, true);
            }
            out.write(pending.toString().getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            fail(e);
        }
        pending.setLength(0);
    }

    /** Writes buffered lines to the file. */
    public synchronized void flush() {
        drain();
    }

    private void fail(IOException e) {
        failed = true;
        LOG.log(Level.WARNING, "Cannot write metrics log " + file + ": " + e.getMessage()
                + "; metric lines for it are dropped (check METRICS_LOCATION / LOG_LOCATION)");
    }

    @Override
    public synchronized void close() {
        flushing.cancel(false);
        drain();
        failed = true;   // a closed sink drops further lines
        if (out != null) {
            try {
                out.close();
            } catch (IOException e) {
                LOG.fine("closing " + file + ": " + e.getMessage());
            }
            out = null;
        }
    }
}

package org.tserve.metrics;

import java.io.BufferedWriter;
import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Appends metric log lines to one file ({@code ts_metrics.log} or {@code model_metrics.log}).
 * Several lines are written per request, so they are buffered and flushed every
 * {@link #FLUSH_MILLIS} ms (and on close) rather than one write per line.
 */
public final class MetricLogSink implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger(MetricLogSink.class.getName());
    private static final DateTimeFormatter TIME = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss,SSS");
    static final long FLUSH_MILLIS = 500;
    private static final ScheduledExecutorService FLUSHER = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "metric-log-flush");
        t.setDaemon(true);
        return t;
    });

    private final File file;
    private Writer out;
    private boolean failed;
    private boolean dirty;
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
        try {
            if (out == null) {
                File dir = file.getAbsoluteFile().getParentFile();
                if (dir != null && !dir.isDirectory() && !dir.mkdirs()) {
                    throw new IOException("cannot create directory " + dir);
                }
                out = new BufferedWriter(new OutputStreamWriter(new FileOutputStream(file, true), StandardCharsets.UTF_8),
                    1 << 16);
            }
            out.write(LocalDateTime.now().format(TIME));
            out.write(" - ");
            out.write(line);
            out.write('\n');
            dirty = true;
        } catch (IOException e) {
            fail(e);
        }
    }

    /** Writes buffered lines to the file. */
    public synchronized void flush() {
        if (out != null && dirty && !failed) {
            try {
                out.flush();
                dirty = false;
            } catch (IOException e) {
                fail(e);
            }
        }
    }

    private void fail(IOException e) {
        failed = true;
        LOG.log(Level.WARNING, "Cannot write metrics log " + file + ": " + e.getMessage()
                + "; metric lines for it are dropped (check METRICS_LOCATION / LOG_LOCATION)");
    }

    @Override
    public synchronized void close() {
        flushing.cancel(false);
        flush();
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

package org.tserve.metrics;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.logging.Level;
import java.util.logging.Logger;

/** Appends metric log lines to one file ({@code ts_metrics.log} or {@code model_metrics.log}), one flushed line each. */
public final class MetricLogSink implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger(MetricLogSink.class.getName());
    private static final DateTimeFormatter TIME = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss,SSS");

    private final File file;
    private Writer out;
    private boolean failed;

    public MetricLogSink(File file) {
        this.file = file;
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
                out = new OutputStreamWriter(new FileOutputStream(file, true), StandardCharsets.UTF_8);
            }
            out.write(LocalDateTime.now().format(TIME));
            out.write(" - ");
            out.write(line);
            out.write('\n');
            out.flush();
        } catch (IOException e) {
            failed = true;
            LOG.log(Level.WARNING, "Cannot write metrics log " + file + ": " + e.getMessage()
                    + "; metric lines for it are dropped (check LOG_LOCATION)");
        }
    }

    @Override
    public synchronized void close() {
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

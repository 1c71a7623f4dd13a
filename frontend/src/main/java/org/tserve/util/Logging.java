package org.tserve.util;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.logging.Formatter;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogManager;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import java.util.logging.StreamHandler;

/**
 * Sets up java.util.logging (and through slf4j-jdk14 everything that logs via slf4j) so that each
 * event is one line: {@code ts_log.log} (server, also on stdout), {@code model_log.log} (worker
 * output, also on stdout) and {@code access_log.log} (one line per request), all in LOG_LOCATION.
 */
public final class Logging {
    /** Logger name for worker stdout/stderr lines. */
    public static final String MODEL_LOG = "MODEL_LOG";
    /** Logger name for the access log. */
    public static final String ACCESS_LOG = "ACCESS_LOG";

    private static boolean configured;
    private static volatile AccessLog accessLog;
    private static final Logger ACCESS = Logger.getLogger(ACCESS_LOG);

    private Logging() {
    }

    /** One line per event: time, level, thread, logger, message (and the exception's text). */
    public static final class LineFormatter extends Formatter {
        private final boolean bare;

        public LineFormatter(boolean bare) {
            this.bare = bare;
        }

        @Override
        public String format(LogRecord r) {
            String msg = formatMessage(r).replace('\n', ' ').replace('\r', ' ');
            StringBuilder sb = new StringBuilder(msg.length() + 80);
            LogTime.appendNow(sb).append(' ');
            if (!bare) {
                String level = levelName(r.getLevel());
                sb.append('[').append(level).append("     ", level.length(), 5).append("] ");
                sb.append(Thread.currentThread().getName()).append(' ');
                String name = r.getLoggerName() == null ? "" : r.getLoggerName();
                sb.append(name.substring(name.lastIndexOf('.') + 1)).append(" - ");
            }
            sb.append(msg);
            Throwable t = r.getThrown();
            if (t != null) {
                sb.append(" | ").append(t);
                if (Boolean.getBoolean("tserve.stacktraces")) {
                    for (StackTraceElement e : t.getStackTrace()) {
                        sb.append(" at ").append(e);
                    }
                }
            }
            return sb.append(System.lineSeparator()).toString();
        }

        private static String levelName(Level l) {
            if (l.intValue() >= Level.SEVERE.intValue()) {
                return "ERROR";
            }
            if (l.intValue() >= Level.WARNING.intValue()) {
                return "WARN";
            }
            if (l.intValue() >= Level.INFO.intValue()) {
                return "INFO";
            }
            return "DEBUG";
        }
    }

    /** A file handler that appends and flushes every line (no JUL lock files). */
    private static final class LineFileHandler extends StreamHandler {
        LineFileHandler(File file, Formatter f) throws IOException {
            super(new FileOutputStream(file, true), f);
            setEncoding(StandardCharsets.UTF_8.name());
        }

        @Override
        public synchronized void publish(LogRecord record) {
            super.publish(record);
            flush();
        }
    }

    /** Console handler writing to stdout, flushing every line. */
    private static final class StdoutHandler extends StreamHandler {
        StdoutHandler(Formatter f) {
            super(new PrintStream(new FileOutputStream(java.io.FileDescriptor.out), true), f);
        }

        @Override
        public synchronized void publish(LogRecord record) {
            super.publish(record);
            flush();
        }

        @Override
        public synchronized void close() {
            flush();
        }
    }

    /** The log directory: env LOG_LOCATION, else {@code logs} under the working directory. */
    public static File logDir() {
        String loc = System.getenv("LOG_LOCATION");
        return new File(loc == null || loc.isEmpty() ? "logs" : loc).getAbsoluteFile();
    }

    /** Configures the three logs; safe to call more than once. */
    public static synchronized void configure(boolean toFiles) throws IOException {
        if (configured) {
            return;
        }
        configured = true;
        LogManager.getLogManager().reset();
        Logger root = Logger.getLogger("");
        root.setLevel(Level.INFO);
        Formatter line = new LineFormatter(false);
        Handler console = new StdoutHandler(line);
        root.addHandler(console);
        Logger model = Logger.getLogger(MODEL_LOG);
        model.setUseParentHandlers(false);
        model.addHandler(console);
        Logger access = Logger.getLogger(ACCESS_LOG);
        access.setUseParentHandlers(false);
        Logger.getLogger("io.netty").setLevel(Level.WARNING);
        Logger.getLogger("io.grpc").setLevel(Level.WARNING);
        if (toFiles) {
            File dir = logDir();
            if (!dir.isDirectory() && !dir.mkdirs()) {
                throw new IOException("cannot create log directory " + dir + " (LOG_LOCATION)");
            }
            root.addHandler(new LineFileHandler(new File(dir, "ts_log.log"), line));
            model.addHandler(new LineFileHandler(new File(dir, "model_log.log"), line));
            accessLog = new AccessLog(new File(dir, "access_log.log"), new LineFormatter(true));
            access.addHandler(accessLog);
        }
    }

    /**
     * The access log when its lines are wanted (a file, and ACCESS_LOG at INFO or finer), else
     * null: callers skip formatting the line altogether.
     */
    public static AccessLog access() {
        AccessLog a = accessLog;
        return a != null && ACCESS.isLoggable(Level.INFO) ? a : null;
    }

    /** Flushes every handler (used at shutdown). */
    public static void flush() {
        for (String n : new String[] {"", MODEL_LOG, ACCESS_LOG}) {
            for (Handler h : Logger.getLogger(n).getHandlers()) {
                h.flush();
            }
        }
    }
}

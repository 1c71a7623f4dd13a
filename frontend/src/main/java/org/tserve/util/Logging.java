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
    /** Logger name whose level decides whether ts_metrics.log gets lines (TorchServe's logger). */
    public static final String TS_METRICS = "TS_METRICS";
    /** Logger name whose level decides whether model_metrics.log gets lines. */
    public static final String MODEL_METRICS = "MODEL_METRICS";
    /** The parent of tserve's own loggers: ts_log.log. */
    public static final String SERVER = "org.tserve";
    /** TorchServe's log4j2 logger → the tserve logger its level applies to. */
    private static final String[][] STREAMS = {
        {"org.pytorch.serve", SERVER}, {ACCESS_LOG, ACCESS_LOG}, {TS_METRICS, TS_METRICS},
        {MODEL_METRICS, MODEL_METRICS}, {MODEL_LOG, MODEL_LOG},
    };
    /** log4j2's FATAL: above SEVERE, so that a FATAL logger drops tserve's errors too. */
    private static final Level FATAL = new Level("FATAL", Level.SEVERE.intValue() + 100) {
        private static final long serialVersionUID = 1L;
    };
    /** Loggers whose level was set: JUL holds loggers weakly, and a collected one forgets its level. */
    private static final java.util.List<Logger> KEPT = new java.util.ArrayList<>();

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
            String msg = formatMessage(r);
            StringBuilder sb = new StringBuilder(msg.length() + 80);
            LogTime.appendNow(sb).append(' ');
            if (!bare) {
                String level = levelName(r.getLevel());
                sb.append('[').append(level).append("     ", level.length(), 5).append("] ");
                sb.append(Thread.currentThread().getName()).append(' ');
                String name = r.getLoggerName() == null ? "" : r.getLoggerName();
                sb.append(name.substring(name.lastIndexOf('.') + 1)).append(" - ");
            }
            LogText.appendOneLine(sb, msg);
            Throwable t = r.getThrown();
            if (t != null) {
                LogText.appendOneLine(sb.append(" | "), String.valueOf(t));
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
        console.setLevel(Level.ALL);   // the loggers' levels decide (a log config may ask for DEBUG)
        root.addHandler(console);
        Logger model = keep(Logger.getLogger(MODEL_LOG));
        model.setUseParentHandlers(false);
        model.addHandler(console);
        Logger access = keep(Logger.getLogger(ACCESS_LOG));
        access.setUseParentHandlers(false);
        keep(Logger.getLogger("io.netty")).setLevel(Level.WARNING);
        keep(Logger.getLogger("io.grpc")).setLevel(Level.WARNING);
        if (toFiles) {
            File dir = logDir();
            if (!dir.isDirectory() && !dir.mkdirs()) {
                throw new IOException("cannot create log directory " + dir + " (LOG_LOCATION)");
            }
            Handler tsLog = new LineFileHandler(new File(dir, "ts_log.log"), line);
            Handler modelLog = new LineFileHandler(new File(dir, "model_log.log"), line);
            tsLog.setLevel(Level.ALL);
            modelLog.setLevel(Level.ALL);
            root.addHandler(tsLog);
            model.addHandler(modelLog);
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

    /** True when {@code loggerName} takes INFO lines (metric lines are written at INFO, as in TorchServe). */
    public static boolean enabled(String loggerName) {
        return Logger.getLogger(loggerName).isLoggable(Level.INFO);
    }

    /**
     * Applies the levels of a TorchServe log4j2 file to tserve's streams: Root to everything,
     * {@code org.pytorch.serve} to ts_log (tserve's own loggers), ACCESS_LOG, TS_METRICS,
     * MODEL_METRICS and MODEL_LOG to theirs, each with log4j2's inheritance (a logger the
     * file does not name gets its nearest configured parent's level, else Root's). Returns
     * one line saying what each stream got.
     */
    public static synchronized String applyLevels(org.tserve.config.LogConfig c) {
        Level root = julLevel(c.effectiveLevel(""));
        keep(Logger.getLogger("")).setLevel(root);
        StringBuilder sb = new StringBuilder("Root=").append(c.effectiveLevel(""));
        for (String[] s : STREAMS) {
            String level = c.effectiveLevel(s[0]);
            keep(Logger.getLogger(s[1])).setLevel(julLevel(level));
            sb.append(", ").append(s[0]).append('=').append(level);
        }
        for (String lib : new String[] {"io.netty", "io.grpc"}) {   // libraries stay at WARNING unless Root is stricter
            keep(Logger.getLogger(lib)).setLevel(root.intValue() > Level.WARNING.intValue() ? root : Level.WARNING);
        }
        return sb.toString();
    }

    private static Logger keep(Logger l) {
        if (!KEPT.contains(l)) {
            KEPT.add(l);
        }
        return l;
    }

    /** The JUL level of a log4j2 level name (OFF .. ALL, upper case). */
    static Level julLevel(String log4j) {
        switch (log4j) {
            case "OFF":
                return Level.OFF;
            case "FATAL":
                return FATAL;
            case "ERROR":
                return Level.SEVERE;
            case "WARN":
                return Level.WARNING;
            case "INFO":
                return Level.INFO;
            case "DEBUG":
                return Level.FINE;
            case "TRACE":
                return Level.FINEST;
            default:
                return Level.ALL;
        }
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

package org.tserve.util;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.Appender;
import org.apache.logging.log4j.core.LoggerContext;
import org.apache.logging.log4j.core.appender.AbstractOutputStreamAppender;
import org.apache.logging.log4j.status.StatusData;
import org.apache.logging.log4j.status.StatusListener;
import org.apache.logging.log4j.status.StatusLogger;
import org.xml.sax.SAXParseException;

/**
 * Starts and stops log4j2. The configuration is the user's ({@code -Dlog4j.configurationFile}, which
 * the launcher sets from {@code --log-config}, or {@code vmargs}) when given, else the bundled one of
 * {@code log_format}: {@code text} (TorchServe's files and line formats) or {@code json} (one JSON
 * object per event). A configuration log4j2 reports errors for stops startup with one line.
 */
public final class LogSetup {
    /** The system property TorchServe's launcher sets. */
    public static final String CONFIG_PROPERTY = "log4j.configurationFile";
    /** The bundled configurations, by {@code log_format}. */
    static final String TEXT_CONFIG = "org/tserve/logging/log4j2.xml";
    static final String JSON_CONFIG = "org/tserve/logging/log4j2-json.xml";
    /** How long a line may wait in a buffered appender ({@code immediateFlush="false"}) before it is written. */
    static final long FLUSH_MILLIS = 200;

    private static LoggerContext context;
    private static ScheduledExecutorService flusher;

    private LogSetup() {
    }

    /**
     * Call first in main, before any logger exists: java.util.logging (gRPC's) goes to log4j2, and
     * log4j2 keeps logging until {@link #stop} (the server's shutdown hook logs its last lines).
     */
    public static void prepare() {
        setIfAbsent("java.util.logging.manager", "org.apache.logging.log4j.jul.LogManager");
        setIfAbsent("log4j.shutdownHookEnabled", "false");
        // the libraries' lines (Netty, gRPC) are kept on one line too, as tserve's own
        setIfAbsent("log4j2.messageFactory", OneLineMessage.Factory.class.getName());
        // the access log sets and clears request id and model per request: in place, not a map copy per change
        setIfAbsent("log4j2.garbagefreeThreadContextMap", "true");
    }

    /**
     * Starts log4j2 and returns what configures it (for the banner). A user's file that log4j2
     * cannot use (not XML, unknown level, missing) is a {@link LogConfigException} naming it and the problem.
     */
    public static String start(String logFormat) {
        String user = System.getProperty(CONFIG_PROPERTY);
        boolean own = user == null || user.trim().isEmpty();
        String location = own ? bundled(logFormat) : user.trim();
        if (own) {
            System.setProperty(CONFIG_PROPERTY, location);
        }
        // the bundled configs' directories (a user's config may use them too): LOG_LOCATION and METRICS_LOCATION
        // resolved as TorchServe does, an empty value meaning unset (log4j2's ${env:X:-default} keeps an empty X)
        System.setProperty("tserve.log_location", Logging.logDir().getPath());
        System.setProperty("tserve.metrics_location", Logging.metricsDir().getPath());
        // log4j2 would print its own complaints with stack traces (a console listener per config): the
        // listener below reports each in one line instead, to the user at startup, on stderr after
        setIfAbsent("Log4jDefaultStatusLevel", "OFF");
        StatusLogger status = StatusLogger.getLogger();
        PROBLEMS.collecting = true;
        status.removeListener(PROBLEMS);   // once, also when started again (tests)
        status.registerListener(PROBLEMS);
        try {
            boolean running = LogManager.getFactory().hasContext(LogSetup.class.getName(), null, false);
            LoggerContext ctx = (LoggerContext) LogManager.getContext(false);   // reads the configuration, builds appenders
            if (running) {
                ctx.reconfigure();   // log4j2 was started before the config was chosen (tests): read it again
            }
            startFlushing(ctx);
        } finally {
            PROBLEMS.collecting = false;
        }
        List<String> found = PROBLEMS.takeFound();
        if (!found.isEmpty()) {
            stop();
            throw new LogConfigException("Log config " + location + " (--log-config / -D" + CONFIG_PROPERTY + ") cannot be used: "
                    + found.get(0) + (own ? "" : "; fix the file or leave it out to get tserve's own logs"));
        }
        if (!own && logFormat != null && !logFormat.trim().equalsIgnoreCase("text")) {
            Logging.logger(LogSetup.class).warn("log_format=" + logFormat.trim() + " is ignored: the log config " + location
                    + " decides the layout");
        }
        return own ? "tserve's " + (location.equals(JSON_CONFIG) ? "json" : "text") + " log config (log_format)" : location;
    }

    /** The bundled configuration of a {@code log_format} value. */
    static String bundled(String logFormat) {
        String f = logFormat == null ? "text" : logFormat.trim().toLowerCase(Locale.ROOT);
        switch (f) {
            case "":
            case "text":
                return TEXT_CONFIG;
            case "json":
                return JSON_CONFIG;
            default:
                throw new LogConfigException("log_format=" + logFormat.trim() + " is not a log format; use text or json "
                        + "(or give your own log4j2 file with --log-config)");
        }
    }

    /**
     * Buffered appenders ({@code immediateFlush="false"}: tserve's access and metric logs, or a user's)
     * are written out every {@link #FLUSH_MILLIS} ms. log4j2 itself writes such a buffer only when
     * it is full, or after each event behind an Async appender, which costs a thread hand-off and
     * a write call per request at low load.
     */
    private static synchronized void startFlushing(LoggerContext ctx) {
        context = ctx;
        if (flusher == null) {
            flusher = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, "log-flush");
                t.setDaemon(true);
                return t;
            });
            flusher.scheduleWithFixedDelay(LogSetup::flushBuffered, FLUSH_MILLIS, FLUSH_MILLIS, TimeUnit.MILLISECONDS);
        }
    }

    /** Writes what buffered appenders hold (the current configuration's, also after a reconfiguration). */
    static synchronized void flushBuffered() {
        if (context == null) {
            return;
        }
        for (Appender a : context.getConfiguration().getAppenders().values()) {
            if (a instanceof AbstractOutputStreamAppender && a.isStarted()) {
                AbstractOutputStreamAppender<?> out = (AbstractOutputStreamAppender<?>) a;
                if (!out.getImmediateFlush()) {
                    try {
                        out.getManager().flush();
                    } catch (RuntimeException e) {
                        // log4j2 reported it through its status logger; the next tick tries again
                    }
                }
            }
        }
    }

    /** Writes what the appenders hold and stops logging (the last call of a stopping server). */
    public static void stop() {
        synchronized (LogSetup.class) {
            if (flusher != null) {
                flusher.shutdownNow();
                flusher = null;
            }
            context = null;
        }
        LogManager.shutdown();   // stopping an appender writes its buffer
    }

    private static void setIfAbsent(String key, String value) {
        if (System.getProperty(key) == null) {
            System.setProperty(key, value);
        }
    }

    private static final Problems PROBLEMS = new Problems();

    /**
     * log4j2's own complaints, one line each. While the configuration is read: errors, and warnings
     * that carry an exception (an unknown level, a bad attribute value), which log4j2 would
     * otherwise skip, collected for {@link #start}. After: errors (an appender that cannot write)
     * on stderr.
     */
    private static final class Problems implements StatusListener {
        private final List<String> found = new ArrayList<>();
        volatile boolean collecting = true;

        synchronized List<String> takeFound() {
            List<String> out = new ArrayList<>(found);
            found.clear();
            return out;
        }

        @Override
        public synchronized void log(StatusData data) {
            Throwable t = data.getThrowable();
            boolean error = data.getLevel().isMoreSpecificThan(Level.ERROR);
            if (!collecting && error) {
                System.err.println("log4j2 " + data.getLevel() + ": " + LogText.oneLine(data.getMessage().getFormattedMessage()
                        + (t == null ? "" : " | " + t)));
            } else if (collecting && (error || t != null)) {
                StringBuilder sb = new StringBuilder(data.getMessage().getFormattedMessage());
                if (t instanceof SAXParseException) {
                    SAXParseException e = (SAXParseException) t;
                    sb.append(": not valid XML: line ").append(e.getLineNumber()).append(", column ")
                            .append(e.getColumnNumber()).append(": ").append(e.getMessage());
                } else if (t != null) {
                    sb.append(": ").append(t.getMessage());
                }
                found.add(LogText.oneLine(sb.toString()));
            }
        }

        @Override
        public Level getStatusLevel() {
            return Level.WARN;
        }

        @Override
        public void close() {
            // nothing held
        }
    }
}

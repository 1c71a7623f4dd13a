package org.tserve.util;

import java.io.File;
import java.util.regex.Pattern;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;

/**
 * tserve logs through log4j2, under TorchServe's logger names, so that a TorchServe
 * {@code log4j2.xml} routes and filters tserve's lines as it does TorchServe's:
 * {@link #MODEL_LOG}, {@link #ACCESS_LOG}, {@link #TS_METRICS}, {@link #MODEL_METRICS}, and the
 * server's own loggers under {@code org.pytorch.serve} ({@code org.tserve.wlm.WorkerThread} logs
 * as {@code org.pytorch.serve.wlm.WorkerThread}). {@link LogSetup} chooses and starts the config.
 */
public final class Logging {
    /** Logger name for worker stdout/stderr lines. */
    public static final String MODEL_LOG = "MODEL_LOG";
    /** Logger name for the access log. */
    public static final String ACCESS_LOG = "ACCESS_LOG";
    /** Logger of the frontend's metric lines (ts_metrics.log). */
    public static final String TS_METRICS = "TS_METRICS";
    /** Logger of the handlers' metric lines (model_metrics.log). */
    public static final String MODEL_METRICS = "MODEL_METRICS";
    /** The parent of tserve's own loggers (ts_log.log): TorchServe's package. */
    public static final String SERVER = "org.pytorch.serve";
    /** tserve's package, replaced by {@link #SERVER} in logger names. */
    private static final String OWN_PACKAGE = "org.tserve";

    /** ThreadContext key of the request id (X-Request-ID) on lines about one request. */
    public static final String REQUEST_ID = "requestId";
    /** ThreadContext key of the model a line is about. */
    public static final String MODEL = "model";
    /** ThreadContext key of the worker a line is about. */
    public static final String WORKER = "worker";

    private Logging() {
    }

    /** The logger of one of tserve's classes: its name with {@code org.tserve} read as {@code org.pytorch.serve}. */
    public static Logger logger(Class<?> c) {
        return named(serverLoggerName(c.getName()));
    }

    /** A logger by name (MODEL_LOG, ACCESS_LOG, ...); every message is kept on one line (see {@link OneLineMessage}). */
    public static Logger named(String name) {
        return LogManager.getLogger(name, OneLineMessage.FACTORY);
    }

    /**
     * The sub-packages of {@code org.tserve.wlm} that sort its classes into rooms (supervision, batching, ...):
     * TorchServe has one {@code org.pytorch.serve.wlm} package, and log configs and log readers name its
     * classes there, so the room is left out of the logger name.
     */
    private static final Pattern WLM_ROOM =
            Pattern.compile("^org\\.tserve\\.wlm\\.(?:api|link|supervision|batching|registry|sequences|multinode)\\.");

    /**
     * {@code org.tserve.x.Y} → {@code org.pytorch.serve.x.Y} ({@code org.tserve.wlm.supervision.WorkerThread} →
     * {@code org.pytorch.serve.wlm.WorkerThread}); other names unchanged.
     */
    public static String serverLoggerName(String className) {
        String name = WLM_ROOM.matcher(className).replaceFirst("org.tserve.wlm.");
        if (name.equals(OWN_PACKAGE) || name.startsWith(OWN_PACKAGE + ".")) {
            return SERVER + name.substring(OWN_PACKAGE.length());
        }
        return name;
    }

    /** The log directory: env LOG_LOCATION, else {@code logs} under the working directory (as the log4j2 configs say). */
    public static File logDir() {
        String loc = System.getenv("LOG_LOCATION");
        return new File(loc == null || loc.isEmpty() ? "logs" : loc).getAbsoluteFile();
    }

    /**
     * The metrics log directory: env METRICS_LOCATION, else {@code logs} under the working directory,
     * whatever LOG_LOCATION says (TorchServe's {@code ${env:METRICS_LOCATION:-logs}}).
     */
    public static File metricsDir() {
        String loc = System.getenv("METRICS_LOCATION");
        return new File(loc == null || loc.isEmpty() ? "logs" : loc).getAbsoluteFile();
    }
}

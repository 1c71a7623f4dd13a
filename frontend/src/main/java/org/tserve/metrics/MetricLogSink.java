package org.tserve.metrics;

import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;

/**
 * Metric log lines through a log4j2 logger ({@code TS_METRICS} or {@code MODEL_METRICS}), which the
 * log4j2 config routes: {@code ts_metrics.log} and {@code model_metrics.log} in tserve's own config,
 * as in TorchServe's. Lines are escaped when they are built ({@link MetricLogLine}), so the logger
 * takes them as they are; nothing is formatted while the logger is off.
 */
public final class MetricLogSink {
    private final Logger log;

    public MetricLogSink(String loggerName) {
        this.log = LogManager.getLogger(loggerName);
    }

    /** Logs {@code line} (the layout adds the time: {@code <time> - <line>} in tserve's config). */
    public void write(String line) {
        if (log.isInfoEnabled()) {
            log.info(line);
        }
    }

    /**
     * Logs {@code <head><value><dimensions>,timestamp:<epoch seconds>} where the value is
     * {@code n / 10^scale} as Java prints a double: the frontend's line, from parts that the
     * registry formats once per metric and model.
     */
    void write(String head, long n, int scale, String dimensions) {
        if (!log.isInfoEnabled()) {
            return;
        }
        StringBuilder sb = new StringBuilder(head.length() + dimensions.length() + 40).append(head);
        MetricValue.appendScaled(sb, n, scale).append(dimensions).append(",timestamp:").append(System.currentTimeMillis() / 1000);
        log.info(sb.toString());
    }
}

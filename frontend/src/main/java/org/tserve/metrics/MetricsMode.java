package org.tserve.metrics;

import java.util.Locale;

/** {@code metrics_mode}: where metrics go. */
public enum MetricsMode {
    /** Every metric is written to ts_metrics.log / model_metrics.log; /metrics is empty (TorchServe's default). */
    LOG,
    /** Every declared metric is a Prometheus series on /metrics; nothing is logged. */
    PROMETHEUS,
    /** Only ts_inference_requests_total and the two latency counters on /metrics; the rest is logged. */
    LEGACY;

    /** Parses the config value; anything unknown is LOG, as in TorchServe. */
    public static MetricsMode parse(String s) {
        if (s == null) {
            return LOG;
        }
        switch (s.trim().toLowerCase(Locale.ROOT)) {
            case "prometheus":
                return PROMETHEUS;
            case "legacy":
                return LEGACY;
            default:
                return LOG;
        }
    }
}

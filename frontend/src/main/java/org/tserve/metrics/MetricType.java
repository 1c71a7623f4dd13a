package org.tserve.metrics;

import java.util.Locale;

/** The three metric kinds of metrics.yaml and of the METRICS frames. */
public enum MetricType {
    COUNTER, GAUGE, HISTOGRAM;

    /** The lower-case name used in metrics.yaml, Prometheus TYPE lines and METRICS frames. */
    public String wireName() {
        return name().toLowerCase(Locale.ROOT);
    }

    /** Parses {@code counter|gauge|histogram} (any case); null when it is none of them. */
    public static MetricType parse(String s) {
        if (s == null) {
            return null;
        }
        switch (s.trim().toLowerCase(Locale.ROOT)) {
            case "counter":
                return COUNTER;
            case "gauge":
                return GAUGE;
            case "histogram":
                return HISTOGRAM;
            default:
                return null;
        }
    }
}

package org.tserve.metrics;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * One metric and its series, one per distinct tuple of label values. Counters add, gauges keep
 * the last value, histograms count observations into cumulative buckets.
 */
public final class MetricFamily {
    private final MetricSpec spec;
    private final List<String> labelNames;
    private final Map<List<String>, Series> series = new ConcurrentHashMap<>();

    /** {@code labelNames} are the Prometheus label names (the spec's dimensions, maybe plus Hostname). */
    public MetricFamily(MetricSpec spec, List<String> labelNames) {
        this.spec = spec;
        this.labelNames = Collections.unmodifiableList(new ArrayList<>(labelNames));
    }

    public MetricFamily(MetricSpec spec) {
        this(spec, spec.dimensions);
    }

    public MetricSpec spec() {
        return spec;
    }

    public List<String> labelNames() {
        return labelNames;
    }

    /** Records a value for the given label values (same order and count as {@link #labelNames()}). */
    public void record(List<String> labelValues, double value) {
        record(series(labelValues), value);
    }

    /**
     * The series of these label values, created if new: callers that record the same labels
     * again and again keep it and call {@link #record(Series, double)}, skipping the lookup.
     */
    public Series series(List<String> labelValues) {
        if (labelValues.size() != labelNames.size()) {
            throw new IllegalArgumentException("metric " + spec.name + " has labels " + labelNames
                    + " but got values " + labelValues);
        }
        Series s = series.get(labelValues);   // lists compare by content; copy the key only for a new series
        if (s == null) {
            s = series.computeIfAbsent(Collections.unmodifiableList(new ArrayList<>(labelValues)),
                k -> new Series(spec.type == MetricType.HISTOGRAM ? spec.buckets() : null));
        }
        return s;
    }

    /** Records a value into a series of this family (from {@link #series(List)}). */
    public void record(Series s, double value) {
        switch (spec.type) {
            case COUNTER:
                s.add(value);
                break;
            case GAUGE:
                s.set(value);
                break;
            default:
                s.observe(value);
                break;
        }
    }

    /** A snapshot of every series, label values → state, in no particular order. */
    public Map<List<String>, Series.Snapshot> snapshot() {
        Map<List<String>, Series.Snapshot> out = new java.util.HashMap<>();
        for (Map.Entry<List<String>, Series> e : series.entrySet()) {
            out.put(e.getKey(), e.getValue().snapshot());
        }
        return out;
    }

    /** The state of one label tuple. */
    public static final class Series {
        private final double[] bounds;
        private final long[] bucketCounts;
        private double value;
        private long count;

        Series(double[] bounds) {
            this.bounds = bounds;
            this.bucketCounts = bounds == null ? null : new long[bounds.length];
        }

        synchronized void add(double v) {
            value += v;
        }

        synchronized void set(double v) {
            value = v;
        }

        synchronized void observe(double v) {
            value += v;
            count++;
            for (int i = 0; i < bounds.length; i++) {
                if (v <= bounds[i]) {
                    bucketCounts[i]++;
                }
            }
        }

        synchronized Snapshot snapshot() {
            return new Snapshot(value, count, bounds, bucketCounts == null ? null : bucketCounts.clone());
        }

        /** Immutable view: value (counter total, gauge value, histogram sum), count and cumulative buckets. */
        public static final class Snapshot {
            public final double value;
            public final long count;
            public final double[] bounds;
            public final long[] cumulativeCounts;

            Snapshot(double value, long count, double[] bounds, long[] cumulativeCounts) {
                this.value = value;
                this.count = count;
                this.bounds = bounds;
                this.cumulativeCounts = cumulativeCounts;
            }
        }
    }
}

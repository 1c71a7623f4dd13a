package org.tserve.metrics;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/** One declared metric: name, unit, kind, dimension (label) names and, for histograms, buckets. */
public final class MetricSpec {
    /** Prometheus client's default buckets (what TorchServe's histograms use). */
    public static final double[] DEFAULT_BUCKETS = {.005, .01, .025, .05, .075, .1, .25, .5, .75, 1, 2.5, 5, 7.5, 10};

    public final String name;
    public final String unit;
    public final MetricType type;
    public final List<String> dimensions;
    private final double[] buckets;

    public MetricSpec(String name, String unit, MetricType type, List<String> dimensions, double[] buckets) {
        this.name = name;
        this.unit = unit == null ? "" : unit;
        this.type = type;
        this.dimensions = Collections.unmodifiableList(new ArrayList<>(dimensions));
        this.buckets = buckets == null ? DEFAULT_BUCKETS.clone() : buckets.clone();
    }

    public MetricSpec(String name, String unit, MetricType type, List<String> dimensions) {
        this(name, unit, type, dimensions, null);
    }

    /** Upper bounds of the histogram buckets, ascending, without +Inf. */
    public double[] buckets() {
        return buckets.clone();
    }

    @Override
    public String toString() {
        return type.wireName() + " " + name + "(" + unit + ") " + dimensions;
    }
}

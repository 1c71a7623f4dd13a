package org.tserve.metrics;

import io.prometheus.metrics.config.EscapingScheme;
import io.prometheus.metrics.expositionformats.ExpositionFormatWriter;
import io.prometheus.metrics.expositionformats.OpenMetricsTextFormatWriter;
import io.prometheus.metrics.expositionformats.PrometheusProtobufWriter;
import io.prometheus.metrics.model.snapshots.ClassicHistogramBuckets;
import io.prometheus.metrics.model.snapshots.CounterSnapshot;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot;
import io.prometheus.metrics.model.snapshots.HistogramSnapshot;
import io.prometheus.metrics.model.snapshots.Labels;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import io.prometheus.metrics.model.snapshots.MetricSnapshots;
import io.prometheus.metrics.model.snapshots.PrometheusNaming;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.logging.log4j.Logger;
import org.tserve.util.Logging;

/**
 * The answers of {@code GET /metrics} that a scraper asks for with {@code Accept} and that Prometheus'
 * Java client (client_java) writes: OpenMetrics text 1.0 ({@code application/openmetrics-text}, ends with
 * {@code # EOF}) and Prometheus protobuf ({@code application/vnd.google.protobuf;
 * proto=io.prometheus.client.MetricFamily; encoding=delimited}). The choice is client_java's own
 * ({@link ExpositionFormatWriter#accepts}); anything else gets TorchServe's text 0.0.4 from
 * {@link PrometheusWriter}.
 *
 * <p>tserve's {@link MetricFamily} series stay the one store of values: each scrape turns them into
 * client_java snapshots, so the request path records as before and only a negotiated scrape pays
 * for the conversion. Counter families are named without {@code _total} (OpenMetrics puts it on the
 * sample: {@code ts_inference_requests_total} is family {@code ts_inference_requests}); names client_java
 * reserves a suffix of ({@code _total}, {@code _created}, {@code _bucket}, {@code _info}) lose it.
 */
public final class ClientJavaExposition {
    private static final Logger LOG = Logging.logger(ClientJavaExposition.class);
    private static final OpenMetricsTextFormatWriter OPEN_METRICS = OpenMetricsTextFormatWriter.create();
    private static final PrometheusProtobufWriter PROTOBUF = new PrometheusProtobufWriter();
    /** Families already reported as left out of these formats (one warning each, not one per scrape). */
    private static final Set<String> WARNED = ConcurrentHashMap.newKeySet();

    private ClientJavaExposition() {
    }

    /**
     * The client_java writer this {@code Accept} header asks for (protobuf first, as client_java's
     * {@code ExpositionFormats} orders them), or null: TorchServe's Prometheus text.
     */
    public static ExpositionFormatWriter negotiate(String accept) {
        if (accept == null) {
            return null;
        }
        if (PROTOBUF.isAvailable() && PROTOBUF.accepts(accept)) {
            return PROTOBUF;
        }
        return OPEN_METRICS.accepts(accept) ? OPEN_METRICS : null;
    }

    /** The families in {@code writer}'s format; names are escaped as the {@code Accept} header's {@code escaping=} asks. */
    public static byte[] write(ExpositionFormatWriter writer, Collection<MetricFamily> families, String accept) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(4096);
        try {
            writer.write(out, snapshots(families), EscapingScheme.fromAcceptHeader(accept));
        } catch (IOException e) {
            throw new UncheckedIOException(e);   // a ByteArrayOutputStream does not throw
        }
        return out.toByteArray();
    }

    /**
     * client_java's snapshots of the families, in their order. A family client_java refuses (a negative
     * counter, a name that is another family's once its suffix is dropped) is left out, with one warning.
     */
    static MetricSnapshots snapshots(Collection<MetricFamily> families) {
        List<MetricSnapshot> out = new ArrayList<>(families.size());
        Set<String> names = new HashSet<>();
        for (MetricFamily f : families) {
            String name = PrometheusNaming.sanitizeMetricName(PrometheusWriter.sanitizeName(f.spec().name));
            if (!names.add(name)) {
                warnOnce(f, "its name is " + name + " in OpenMetrics, as another family's");
                continue;
            }
            try {
                out.add(snapshot(f, name));
            } catch (IllegalArgumentException e) {
                warnOnce(f, e.getMessage());
            }
        }
        return new MetricSnapshots(out);
    }

    private static MetricSnapshot snapshot(MetricFamily f, String name) {
        String help = PrometheusWriter.help(f.spec());
        List<String> labelNames = new ArrayList<>();
        for (String l : f.labelNames()) {
            labelNames.add(PrometheusWriter.sanitizeLabel(l));
        }
        Map<List<String>, MetricFamily.Series.Snapshot> series = f.snapshot();
        switch (f.spec().type) {
            case COUNTER: {
                CounterSnapshot.Builder b = CounterSnapshot.builder().name(name).help(help);
                series.forEach((values, s) -> b.dataPoint(CounterSnapshot.CounterDataPointSnapshot.builder()
                    .labels(Labels.of(labelNames, values)).value(s.value).build()));
                return b.build();
            }
            case GAUGE: {
                GaugeSnapshot.Builder b = GaugeSnapshot.builder().name(name).help(help);
                series.forEach((values, s) -> b.dataPoint(GaugeSnapshot.GaugeDataPointSnapshot.builder()
                    .labels(Labels.of(labelNames, values)).value(s.value).build()));
                return b.build();
            }
            default: {
                HistogramSnapshot.Builder b = HistogramSnapshot.builder().name(name).help(help);
                series.forEach((values, s) -> b.dataPoint(HistogramSnapshot.HistogramDataPointSnapshot.builder()
                    .labels(Labels.of(labelNames, values)).classicHistogramBuckets(buckets(s)).sum(s.value).build()));
                return b.build();
            }
        }
    }

    /** client_java's buckets count each bucket on its own (not cumulatively) and end with +Inf. */
    private static ClassicHistogramBuckets buckets(MetricFamily.Series.Snapshot s) {
        int n = s.bounds.length;
        double[] bounds = new double[n + 1];
        long[] counts = new long[n + 1];
        long below = 0;
        for (int i = 0; i < n; i++) {
            bounds[i] = s.bounds[i];
            counts[i] = s.cumulativeCounts[i] - below;
            below = s.cumulativeCounts[i];
        }
        bounds[n] = Double.POSITIVE_INFINITY;
        counts[n] = s.count - below;
        return ClassicHistogramBuckets.of(bounds, counts);
    }

    private static void warnOnce(MetricFamily f, String why) {
        if (WARNED.add(f.spec().name)) {
            LOG.warn("Metric {} is left out of the OpenMetrics and protobuf answers of /metrics: {}", f.spec().name, why);
        }
    }
}

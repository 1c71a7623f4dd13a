package org.tserve.metrics;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import org.junit.Test;

public class PrometheusWriterTest {
    private static MetricFamily family(String name, MetricType type, String... dims) {
        return new MetricFamily(new MetricSpec(name, "Count", type, Arrays.asList(dims)));
    }

    @Test
    public void counterHasHelpTypeAndTrailingCommaLabels() {
        MetricFamily f = family("Requests2XX", MetricType.COUNTER, "Level", "Hostname");
        f.record(Arrays.asList("Host", "h"), 1);
        f.record(Arrays.asList("Host", "h"), 2);
        String text = PrometheusWriter.write(Collections.singletonList(f), null);
        assertEquals("# HELP Requests2XX Torchserve prometheus counter metric with unit: Count\n"
                + "# TYPE Requests2XX counter\n"
                + "Requests2XX{Level=\"Host\",Hostname=\"h\",} 3.0\n", text);
    }

    @Test
    public void gaugeKeepsLastValue() {
        MetricFamily f = family("QueueTime", MetricType.GAUGE, "Level");
        f.record(List.of("Host"), 5);
        f.record(List.of("Host"), 2.5);
        assertTrue(PrometheusWriter.write(List.of(f), null).endsWith("QueueTime{Level=\"Host\",} 2.5\n"));
    }

    @Test
    public void histogramHasCumulativeBucketsCountAndSum() {
        MetricSpec spec = new MetricSpec("Lat", "ms", MetricType.HISTOGRAM, List.of("ModelName"), new double[] {1, 10});
        MetricFamily f = new MetricFamily(spec);
        f.record(List.of("m"), 0.5);
        f.record(List.of("m"), 5);
        f.record(List.of("m"), 50);
        String text = PrometheusWriter.write(List.of(f), null);
        assertEquals("# HELP Lat Torchserve prometheus histogram metric with unit: ms\n"
                + "# TYPE Lat histogram\n"
                + "Lat_bucket{ModelName=\"m\",le=\"1.0\",} 1.0\n"
                + "Lat_bucket{ModelName=\"m\",le=\"10.0\",} 2.0\n"
                + "Lat_bucket{ModelName=\"m\",le=\"+Inf\",} 3.0\n"
                + "Lat_count{ModelName=\"m\",} 3.0\n"
                + "Lat_sum{ModelName=\"m\",} 55.5\n", text);
    }

    @Test
    public void histogramDefaultBucketsArePrometheusDefaults() {
        MetricFamily f = family("H", MetricType.HISTOGRAM);
        f.record(List.of(), 0.3);
        String text = PrometheusWriter.write(List.of(f), null);
        assertEquals(MetricSpec.DEFAULT_BUCKETS.length + 1, text.split("H_bucket", -1).length - 1);
        assertTrue(text.contains("H_bucket{le=\"0.25\",} 0.0\n"));
        assertTrue(text.contains("H_bucket{le=\"0.5\",} 1.0\n"));
        assertTrue(text.contains("H_count 1.0\n"));
    }

    @Test
    public void labelValuesAreEscaped() {
        MetricFamily f = family("c", MetricType.COUNTER, "path");
        f.record(List.of("a\\b\"c\nd"), 1);
        assertTrue(PrometheusWriter.write(List.of(f), null).contains("c{path=\"a\\\\b\\\"c\\nd\",} 1.0\n"));
    }

    @Test
    public void invalidNamesAreSanitized() {
        assertEquals("my_metric_1", PrometheusWriter.sanitizeName("my-metric.1"));
        assertEquals("_9lives", PrometheusWriter.sanitizeName("9lives"));
        assertEquals("a:b", PrometheusWriter.sanitizeName("a:b"));
        assertEquals("a_b", PrometheusWriter.sanitizeLabel("a:b"));
        assertEquals("Gr__e", PrometheusWriter.sanitizeLabel("Größe"));
    }

    @Test
    public void nameFilterKeepsListedFamiliesAndHistogramSampleNames() {
        MetricFamily a = family("a", MetricType.COUNTER);
        MetricFamily b = family("b", MetricType.GAUGE);
        MetricFamily h = family("h", MetricType.HISTOGRAM);
        a.record(List.of(), 1);
        b.record(List.of(), 1);
        h.record(List.of(), 1);
        String text = PrometheusWriter.write(List.of(a, b, h), new HashSet<>(List.of("b", "h_bucket")));
        assertFalse(text.contains("# TYPE a "));
        assertTrue(text.contains("# TYPE b gauge"));
        assertTrue(text.contains("# TYPE h histogram"));
    }

    @Test
    public void declaredFamilyWithoutSamplesStillHasHelpAndType() {
        String text = PrometheusWriter.write(List.of(family("empty", MetricType.COUNTER, "x")), null);
        assertEquals("# HELP empty Torchserve prometheus counter metric with unit: Count\n# TYPE empty counter\n", text);
    }

    @Test
    public void specialValues() {
        assertEquals("+Inf", PrometheusWriter.formatValue(Double.POSITIVE_INFINITY));
        assertEquals("-Inf", PrometheusWriter.formatValue(Double.NEGATIVE_INFINITY));
        assertEquals("NaN", PrometheusWriter.formatValue(Double.NaN));
        assertEquals("8.0", PrometheusWriter.formatValue(8));
    }
}

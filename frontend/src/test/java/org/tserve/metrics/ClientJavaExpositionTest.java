package org.tserve.metrics;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertTrue;

import io.prometheus.metrics.expositionformats.ExpositionFormatWriter;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.Test;

public class ClientJavaExpositionTest {
    private static final String OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    private static final String PROTOBUF =
        "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";
    /** What Prometheus 2.x sends by default. */
    private static final String PROMETHEUS_ACCEPT = "application/openmetrics-text;version=1.0.0,"
        + "application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

    private static String openMetrics(List<MetricFamily> families) {
        ExpositionFormatWriter w = ClientJavaExposition.negotiate(OPENMETRICS);
        return new String(ClientJavaExposition.write(w, families, OPENMETRICS), StandardCharsets.UTF_8);
    }

    @Test
    public void plainTextAndNoAcceptStayTorchServesText() {
        assertNull(ClientJavaExposition.negotiate(null));
        assertNull(ClientJavaExposition.negotiate("text/plain; version=0.0.4"));
        assertNull(ClientJavaExposition.negotiate("*/*"));
    }

    @Test
    public void openMetricsAndProtobufAreNegotiated() {
        ExpositionFormatWriter om = ClientJavaExposition.negotiate(PROMETHEUS_ACCEPT);
        assertEquals(OPENMETRICS, om.getContentType());
        assertSame(om, ClientJavaExposition.negotiate(OPENMETRICS));
        assertTrue(ClientJavaExposition.negotiate(PROTOBUF).getContentType().startsWith("application/vnd.google.protobuf"));
    }

    @Test
    public void counterGetsTotalOnItsSampleAndTheFileEndsWithEof() {
        MetricFamily f = new MetricFamily(new MetricSpec("Requests2XX", "Count", MetricType.COUNTER, List.of("Level", "Hostname")));
        f.record(List.of("Host", "h"), 3);
        MetricFamily legacy = new MetricFamily(new MetricSpec("ts_inference_requests_total", "Count", MetricType.COUNTER,
            List.of("model_name")));
        legacy.record(List.of("echo"), 2);
        assertEquals("# TYPE Requests2XX counter\n"
                + "# HELP Requests2XX Torchserve prometheus counter metric with unit: Count\n"
                + "Requests2XX_total{Hostname=\"h\",Level=\"Host\"} 3.0\n"
                + "# TYPE ts_inference_requests counter\n"
                + "# HELP ts_inference_requests Torchserve prometheus counter metric with unit: Count\n"
                + "ts_inference_requests_total{model_name=\"echo\"} 2.0\n"
                + "# EOF\n", openMetrics(List.of(f, legacy)));
    }

    @Test
    public void histogramBucketsStayCumulativeWithInfCountAndSum() {
        MetricSpec spec = new MetricSpec("Lat", "ms", MetricType.HISTOGRAM, List.of("ModelName"), new double[] {1, 10});
        MetricFamily f = new MetricFamily(spec);
        f.record(List.of("m"), 0.5);
        f.record(List.of("m"), 5);
        f.record(List.of("m"), 50);
        String text = openMetrics(List.of(f));
        assertTrue(text, text.contains("Lat_bucket{ModelName=\"m\",le=\"1.0\"} 1\n"
                + "Lat_bucket{ModelName=\"m\",le=\"10.0\"} 2\n"
                + "Lat_bucket{ModelName=\"m\",le=\"+Inf\"} 3\n"
                + "Lat_count{ModelName=\"m\"} 3\n"
                + "Lat_sum{ModelName=\"m\"} 55.5\n"));
    }

    @Test
    public void familiesWithoutSamplesAreLeftOut() {
        MetricFamily f = new MetricFamily(new MetricSpec("Idle", "ms", MetricType.GAUGE, List.of()));
        assertEquals("# EOF\n", openMetrics(List.of(f)));
    }

    @Test
    public void gaugeAndEscapedLabelValues() {
        MetricFamily f = new MetricFamily(new MetricSpec("QueueTime", "ms", MetricType.GAUGE, List.of("path")));
        f.record(List.of("a\\b\"c\nd"), 2.5);
        assertTrue(openMetrics(List.of(f)).contains("QueueTime{path=\"a\\\\b\\\"c\\nd\"} 2.5\n"));
    }

    @Test
    public void aFamilyClientJavaRefusesIsLeftOutNotTheScrape() {
        MetricFamily negative = new MetricFamily(new MetricSpec("Refunds", "Count", MetricType.COUNTER, List.of()));
        negative.record(List.of(), -1);
        MetricFamily clash = new MetricFamily(new MetricSpec("Jobs", "Count", MetricType.COUNTER, List.of()));
        clash.record(List.of(), 4);
        MetricFamily clashTotal = new MetricFamily(new MetricSpec("Jobs_total", "Count", MetricType.GAUGE, List.of()));
        clashTotal.record(List.of(), 5);
        MetricFamily ok = new MetricFamily(new MetricSpec("Ok", "Count", MetricType.GAUGE, List.of()));
        ok.record(List.of(), 1);
        String text = openMetrics(List.of(negative, clash, clashTotal, ok));
        assertTrue(text, !text.contains("Refunds") && text.contains("Jobs_total 4.0\n") && !text.contains("Jobs gauge"));
        assertTrue(text, text.endsWith("Ok 1.0\n# EOF\n"));
    }

    @Test
    public void protobufIsLengthDelimitedMetricFamilies() {
        MetricFamily f = new MetricFamily(new MetricSpec("QueueTime", "ms", MetricType.GAUGE, List.of()));
        f.record(List.of(), 2);
        ExpositionFormatWriter w = ClientJavaExposition.negotiate(PROTOBUF);
        byte[] body = ClientJavaExposition.write(w, List.of(f), PROTOBUF);
        assertEquals(body.length - 1, body[0]);   // one varint-delimited MetricFamily message, shorter than 128 bytes
        assertTrue(new String(body, StandardCharsets.ISO_8859_1).contains("QueueTime"));
    }
}

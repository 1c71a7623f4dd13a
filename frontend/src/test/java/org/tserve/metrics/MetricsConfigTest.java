package org.tserve.metrics;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.List;
import org.junit.Test;

public class MetricsConfigTest {
    private static Path defaultYaml() {
        return Paths.get(System.getProperty("tserve.repo", "../"), "ts", "configs", "metrics.yaml");
    }

    @Test
    public void defaultFileDeclaresTorchServesMetrics() {
        MetricsConfig c = MetricsConfig.load(defaultYaml());
        for (String n : List.of("Requests2XX", "Requests4XX", "Requests5XX", "ts_inference_requests_total",
            "ts_inference_latency_microseconds", "ts_queue_latency_microseconds")) {
            assertEquals(n, MetricType.COUNTER, c.tsMetrics().get(n).type);
        }
        for (String n : List.of("QueueTime", "WorkerThreadTime", "WorkerLoadTime", "CPUUtilization", "MemoryUsed",
            "MemoryAvailable", "MemoryUtilization", "DiskUsage", "DiskAvailable", "DiskUtilization",
            "GPUMemoryUtilization", "GPUMemoryUsed", "GPUUtilization")) {
            assertEquals(n, MetricType.GAUGE, c.tsMetrics().get(n).type);
        }
        assertEquals(Arrays.asList("Level", "Hostname"), c.tsMetrics().get("Requests2XX").dimensions);
        assertEquals(Arrays.asList("model_name", "model_version", "hostname"),
            c.tsMetrics().get("ts_inference_requests_total").dimensions);
        assertEquals(Arrays.asList("WorkerName", "Level", "Hostname"), c.tsMetrics().get("WorkerLoadTime").dimensions);
        assertEquals(Arrays.asList("Level", "DeviceId", "Hostname"), c.tsMetrics().get("GPUUtilization").dimensions);
        MetricSpec ht = c.modelMetrics().get("HandlerTime");
        assertEquals(MetricType.GAUGE, ht.type);
        assertEquals("ms", ht.unit);
        assertEquals(Arrays.asList("ModelName", "Level"), ht.dimensions);
        assertEquals("Microseconds", c.tsMetrics().get("ts_inference_latency_microseconds").unit);
    }

    @Test
    public void anchorsAndHistogramBuckets() {
        MetricsConfig c = MetricsConfig.parse("dimensions:\n  - &m \"ModelName\"\n"
            + "model_metrics:\n  histogram:\n    - name: Size\n      unit: MB\n      dimensions: [*m, \"Kind\"]\n"
            + "      buckets: [1, 2.5, 10]\n  counter:\n    - name: Hits\n      unit: Count\n", "t.yaml");
        MetricSpec s = c.modelMetrics().get("Size");
        assertEquals(MetricType.HISTOGRAM, s.type);
        assertEquals(Arrays.asList("ModelName", "Kind"), s.dimensions);
        assertArrayEquals(new double[] {1, 2.5, 10}, s.buckets(), 0);
        assertTrue(c.modelMetrics().get("Hits").dimensions.isEmpty());
        assertArrayEquals(MetricSpec.DEFAULT_BUCKETS, c.modelMetrics().get("Hits").buckets(), 0);
        assertTrue(c.tsMetrics().isEmpty());
    }

    @Test
    public void emptyFileHasNoMetrics() {
        MetricsConfig c = MetricsConfig.parse("", "empty.yaml");
        assertTrue(c.tsMetrics().isEmpty());
        assertTrue(c.modelMetrics().isEmpty());
    }

    private static void assertRejected(String yaml, String... fragments) {
        try {
            MetricsConfig.parse(yaml, "bad.yaml");
            fail("accepted: " + yaml);
        } catch (MetricsConfigException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("bad.yaml"));
            for (String f : fragments) {
                assertTrue(e.getMessage(), e.getMessage().contains(f));
            }
        }
    }

    @Test
    public void malformedFilesAreRejectedWithTheReason() {
        assertRejected("ts_metrics: [1, 2]", "ts_metrics", "mapping");
        assertRejected("ts_metrics:\n  summary:\n    - name: x\n", "unknown metric type 'summary'", "counter, gauge or histogram");
        assertRejected("ts_metrics:\n  counter:\n    - unit: Count\n", "has no name");
        assertRejected("ts_metrics:\n  counter:\n    - name: a\n    - name: a\n", "'a' is declared twice");
        assertRejected("model_metrics:\n  gauge:\n    - name: g\n      dimensions: x\n", "dimensions of metric 'g'");
        assertRejected("model_metrics:\n  histogram:\n    - name: h\n      buckets: [3, 1]\n", "ascending");
        assertRejected("a: [unclosed", "not valid YAML");
        assertRejected("- just\n- a list\n", "must be a mapping");
    }

    @Test
    public void missingFileNamesThePathAndTheKey() {
        try {
            MetricsConfig.load(Paths.get("/nonexistent/metrics.yaml"));
            fail();
        } catch (MetricsConfigException e) {
            assertTrue(e.getMessage().contains("/nonexistent/metrics.yaml"));
            assertTrue(e.getMessage().contains("metrics_config"));
        }
    }
}

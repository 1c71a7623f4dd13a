package org.tserve.metrics;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.io.File;
import java.io.IOException;
import java.nio.file.Paths;
import java.util.List;
import java.util.Set;
import org.junit.Rule;
import org.junit.Test;
import org.tserve.util.LogCapture;
import org.tserve.util.Logging;

public class MetricsRegistryTest {
    @Rule
    public LogCapture tsMetrics = new LogCapture(Logging.TS_METRICS, "%d{ISO8601} - %m");
    @Rule
    public LogCapture modelMetrics = new LogCapture(Logging.MODEL_METRICS, "%d{ISO8601} - %m");

    private static MetricsConfig defaults() {
        return MetricsConfig.load(Paths.get(System.getProperty("tserve.repo", "../"), "ts", "configs", "metrics.yaml"));
    }

    private MetricsRegistry registry(MetricsMode mode, boolean autoDetect) throws IOException {
        return new MetricsRegistry(defaults(), mode, "h", true, autoDetect);
    }

    /** The lines logged to ts_metrics.log or model_metrics.log (as tserve's log4j2 config formats them). */
    private List<String> lines(String file) {
        return (file.equals("ts_metrics.log") ? tsMetrics : modelMetrics).lines();
    }

    @Test
    public void prometheusModeCountsRequestsAndLatencyPerModelVersion() throws IOException {
        MetricsRegistry r = registry(MetricsMode.PROMETHEUS, false);
        r.requestReceived("m", null);
        r.requestReceived("m", "2.0");
        r.requestReceived("m", "2.0");
        r.responseSent(200);
        r.responseSent(404);
        r.responseSent(503);
        r.responseSent(503);
        r.inferenceCompleted("m", "2.0", 1500, 300);
        r.inferenceCompleted("m", "2.0", 500, 100);
        String t = r.scrape(null);
        assertTrue(t, t.contains("ts_inference_requests_total{model_name=\"m\",model_version=\"default\",hostname=\"h\",} 1.0\n"));
        assertTrue(t, t.contains("ts_inference_requests_total{model_name=\"m\",model_version=\"2.0\",hostname=\"h\",} 2.0\n"));
        assertTrue(t, t.contains("ts_inference_latency_microseconds{model_name=\"m\",model_version=\"2.0\",hostname=\"h\",} 2000.0\n"));
        assertTrue(t, t.contains("ts_queue_latency_microseconds{model_name=\"m\",model_version=\"2.0\",hostname=\"h\",} 400.0\n"));
        assertTrue(t, t.contains("Requests2XX{Level=\"Host\",Hostname=\"h\",} 1.0\n"));
        assertTrue(t, t.contains("Requests4XX{Level=\"Host\",Hostname=\"h\",} 1.0\n"));
        assertTrue(t, t.contains("Requests5XX{Level=\"Host\",Hostname=\"h\",} 2.0\n"));
        assertTrue(t, t.contains("QueueTime{Level=\"Host\",Hostname=\"h\",} 0.1\n"));
        assertTrue(t, t.contains("# TYPE HandlerTime gauge\n"));
        assertTrue(lines("ts_metrics.log").isEmpty());
    }

    @Test
    public void nameFilter() throws IOException {
        MetricsRegistry r = registry(MetricsMode.PROMETHEUS, false);
        r.requestReceived("m", null);
        String t = r.scrape(Set.of("ts_inference_requests_total"));
        assertTrue(t.startsWith("# HELP ts_inference_requests_total "));
        assertFalse(t.contains("Requests2XX"));
    }

    @Test
    public void workerLoadTimeCarriesTheWorkerName() throws IOException {
        MetricsRegistry r = registry(MetricsMode.PROMETHEUS, false);
        r.workerLoaded("W-9000-m_1.0", 1234);
        assertTrue(r.scrape(null).contains("WorkerLoadTime{WorkerName=\"W-9000-m_1.0\",Level=\"Host\",Hostname=\"h\",} 1234.0\n"));
    }

    @Test
    public void declaredHandlerMetricBecomesASeriesWithDimensionsAndHostname() throws IOException {
        MetricsRegistry r = registry(MetricsMode.PROMETHEUS, false);
        r.backendMetrics("mnist", "W-9000-mnist_1.0", "[{\"name\":\"HandlerTime\",\"unit\":\"ms\",\"value\":12.5,"
            + "\"type\":\"gauge\",\"dimensions\":{\"ModelName\":\"mnist\",\"Level\":\"Model\"},\"requestId\":\"a1\"}]");
        assertTrue(r.scrape(null).contains("HandlerTime{ModelName=\"mnist\",Level=\"Model\",Hostname=\"h\",} 12.5\n"));
    }

    /** A Prometheus-named metric (llm_*) gets the snake_case {@code hostname} label promtool wants. */
    @Test
    public void prometheusNamedHandlerMetricGetsALowercaseHostnameLabel() throws IOException {
        MetricsRegistry r = registry(MetricsMode.PROMETHEUS, false);
        r.backendMetrics("tiny", "W-9000-tiny_1.0", "[{\"name\":\"llm_num_requests_running\",\"unit\":\"Count\","
            + "\"value\":3,\"type\":\"gauge\",\"dimensions\":{\"model_name\":\"tiny\"},\"requestId\":\"a1\"}]");
        String t = r.scrape(null);
        assertTrue(t, t.contains("llm_num_requests_running{model_name=\"tiny\",hostname=\"h\",} 3.0\n"));
    }

    @Test
    public void undeclaredHandlerMetricNeedsAutoDetect() throws IOException {
        String frame = "[{\"name\":\"Hits\",\"unit\":\"Count\",\"value\":2,\"type\":\"counter\","
            + "\"dimensions\":{\"ModelName\":\"m\",\"Kind\":\"x\"},\"requestId\":\"r\"}]";
        MetricsRegistry off = registry(MetricsMode.PROMETHEUS, false);
        off.backendMetrics("m", "w", frame);
        assertFalse(off.scrape(null).contains("Hits"));
        MetricsRegistry on = registry(MetricsMode.PROMETHEUS, true);
        on.backendMetrics("m", "w", frame);
        on.backendMetrics("m", "w", frame);
        String t = on.scrape(null);
        assertTrue(t, t.contains("# TYPE Hits counter\n"));
        assertTrue(t, t.contains("Hits{ModelName=\"m\",Kind=\"x\",Hostname=\"h\",} 4.0\n"));
    }

    @Test
    public void histogramHandlerMetric() throws IOException {
        MetricsConfig c = MetricsConfig.parse("model_metrics:\n  histogram:\n    - name: Size\n      unit: MB\n"
            + "      dimensions: [ModelName]\n      buckets: [1, 10]\n", "t");
        MetricsRegistry r = new MetricsRegistry(c, MetricsMode.PROMETHEUS, "h", false, false);
        for (double v : new double[] {0.5, 5, 50}) {
            r.backendMetrics("m", "w", "[{\"name\":\"Size\",\"unit\":\"MB\",\"value\":" + v
                + ",\"type\":\"histogram\",\"dimensions\":{\"ModelName\":\"m\"}}]");
        }
        String t = r.scrape(null);
        assertTrue(t, t.contains("Size_bucket{ModelName=\"m\",Hostname=\"h\",le=\"10.0\",} 2.0\n"));
        assertTrue(t, t.contains("Size_count{ModelName=\"m\",Hostname=\"h\",} 3.0\n"));
    }

    @Test
    public void malformedFramesAreSkipped() throws IOException {
        MetricsRegistry r = registry(MetricsMode.PROMETHEUS, true);
        r.backendMetrics("m", "w", "not json");
        r.backendMetrics("m", "w", "{\"a\": 1}");
        r.backendMetrics("m", "w", "[{\"name\": \"x\"}, {\"name\":\"ok\",\"value\":1,\"type\":\"gauge\",\"dimensions\":{}}]");
        assertTrue(r.scrape(null).contains("ok{Hostname=\"h\",} 1.0\n"));
    }

    @Test
    public void logModeWritesTorchServeLogLinesAndScrapesNothing() throws IOException {
        MetricsRegistry r = registry(MetricsMode.LOG, false);
        r.responseSent(200);
        r.requestReceived("m", null);
        r.systemMetric("GPUUtilization", 42, "0");
        r.backendMetrics("m", "w", "[{\"name\":\"HandlerTime\",\"unit\":\"Milliseconds\",\"value\":3.5,"
            + "\"type\":\"gauge\",\"dimensions\":{\"ModelName\":\"m\",\"Level\":\"Model\"},\"requestId\":\"a1,b2\"}]");
        assertEquals("", r.scrape(null));
        List<String> ts = lines("ts_metrics.log");
        assertEquals(3, ts.size());
        assertTrue(ts.get(0), ts.get(0).matches(
            "\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d,\\d{3} - Requests2XX\\.Count:1\\.0\\|#Level:Host\\|#hostname:h,timestamp:\\d+"));
        assertTrue(ts.get(1), ts.get(1).matches(
            ".* - ts_inference_requests_total\\.Count:1\\.0\\|#model_name:m,model_version:default\\|#hostname:h,timestamp:\\d+"));
        assertTrue(ts.get(2), ts.get(2).matches(
            ".* - GPUUtilization\\.Percent:42\\.0\\|#Level:Host,DeviceId:0\\|#hostname:h,timestamp:\\d+"));
        List<String> model = lines("model_metrics.log");
        assertEquals(1, model.size());
        // the yaml's unit, as TorchServe's LogMetric writes it: the worker's "Milliseconds" is not the line's
        assertTrue(model.get(0), model.get(0).matches(
            ".* - HandlerTime\\.ms:3\\.5\\|#ModelName:m,Level:Model\\|#hostname:h,requestID:a1,b2,timestamp:\\d+"));
    }

    @Test
    public void logModeWritesDeclaredHandlerMetricsInTheYamlsOrderAndDropsUndeclaredOnes() throws IOException {
        String frame = "[{\"name\":\"PredictionTime\",\"unit\":\"Milliseconds\",\"value\":2,\"type\":\"gauge\","
            + "\"dimensions\":{\"Level\":\"Model\",\"ModelName\":\"m\"},\"requestId\":\"r\"},"
            + "{\"name\":\"HandlerMethodTime\",\"unit\":\"Milliseconds\",\"value\":1,\"type\":\"gauge\","
            + "\"dimensions\":{\"ModelName\":\"m\"},\"requestId\":\"r\"}]";
        registry(MetricsMode.LOG, false).backendMetrics("m", "w", frame);
        List<String> model = lines("model_metrics.log");
        assertEquals(model.toString(), 1, model.size());   // HandlerMethodTime is not declared: not written (TorchServe)
        assertTrue(model.get(0), body(model.get(0)).startsWith("PredictionTime.ms:2.0|#ModelName:m,Level:Model|#hostname:h,"));
        registry(MetricsMode.LOG, true).backendMetrics("m", "w", frame);   // auto-detect: the worker's own unit
        assertTrue(lines("model_metrics.log").toString(),
            body(lines("model_metrics.log").get(2)).startsWith("HandlerMethodTime.Milliseconds:1.0|#ModelName:m|#hostname:h,requestID:r,"));
    }

    /** Drops {@code <time> - } and checks that the time is TorchServe's layout. */
    private static String body(String line) {
        assertTrue(line, line.matches("\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d,\\d{3} - .*"));
        return line.substring(26);
    }

    @Test
    public void logModeLinesByteForByte() throws IOException {
        MetricsRegistry r = registry(MetricsMode.LOG, false);
        long before = System.currentTimeMillis() / 1000;
        r.requestReceived("m", "1.0");
        r.responseSent(200);
        r.responseSent(404);
        r.responseSent(503);
        r.inferenceCompleted("m", "1.0", 1500, 250);
        r.inferenceCompleted("m", null, 20_000_123, 1);
        r.workerThreadNanos(1_234_500);
        r.workerThreadNanos(3_000_000);
        r.workerThreadTime(0.5);
        r.workerLoaded("W-9000-m_1.0", 812);
        r.backendMetrics("m", "w", "[{\"name\":\"PredictionTime\",\"unit\":\"ms\",\"value\":0.07,"
            + "\"type\":\"gauge\",\"dimensions\":{\"ModelName\":\"m\",\"Level\":\"Model\"},\"requestId\":\"r1\"}]");
        long after = System.currentTimeMillis() / 1000;
        String[] expected = {
            "ts_inference_requests_total.Count:1.0|#model_name:m,model_version:1.0|#hostname:h,timestamp:",
            "Requests2XX.Count:1.0|#Level:Host|#hostname:h,timestamp:",
            "Requests4XX.Count:1.0|#Level:Host|#hostname:h,timestamp:",
            "Requests5XX.Count:1.0|#Level:Host|#hostname:h,timestamp:",
            "ts_inference_latency_microseconds.Microseconds:1500.0|#model_name:m,model_version:1.0|#hostname:h,timestamp:",
            "ts_queue_latency_microseconds.Microseconds:250.0|#model_name:m,model_version:1.0|#hostname:h,timestamp:",
            "QueueTime.Milliseconds:0.25|#Level:Host|#hostname:h,timestamp:",
            "ts_inference_latency_microseconds.Microseconds:2.0000123E7|#model_name:m,model_version:default|#hostname:h,timestamp:",
            "ts_queue_latency_microseconds.Microseconds:1.0|#model_name:m,model_version:default|#hostname:h,timestamp:",
            "QueueTime.Milliseconds:0.001|#Level:Host|#hostname:h,timestamp:",
            "WorkerThreadTime.Milliseconds:1.2345|#Level:Host|#hostname:h,timestamp:",
            "WorkerThreadTime.Milliseconds:3.0|#Level:Host|#hostname:h,timestamp:",
            "WorkerThreadTime.Milliseconds:0.5|#Level:Host|#hostname:h,timestamp:",
            "WorkerLoadTime.Milliseconds:812.0|#WorkerName:W-9000-m_1.0,Level:Host|#hostname:h,timestamp:",
        };
        List<String> ts = lines("ts_metrics.log");
        assertEquals(ts.toString(), expected.length, ts.size());
        for (int i = 0; i < expected.length; i++) {
            String b = body(ts.get(i));
            assertTrue(b, b.startsWith(expected[i]));
            long stamp = Long.parseLong(b.substring(expected[i].length()));
            assertTrue(b, stamp >= before && stamp <= after);
        }
        List<String> model = lines("model_metrics.log");
        assertEquals(1, model.size());
        String b = body(model.get(0));
        assertTrue(b, b.startsWith("PredictionTime.ms:0.07|#ModelName:m,Level:Model|#hostname:h,requestID:r1,timestamp:"));
    }

    @Test
    public void legacyModeExposesOnlyTheThreeCountersAndLogsTheRest() throws IOException {
        MetricsRegistry r = registry(MetricsMode.LEGACY, false);
        r.requestReceived("m", "1");
        r.responseSent(200);
        String t = r.scrape(null);
        assertTrue(t, t.contains("ts_inference_requests_total{model_name=\"m\",model_version=\"1\",hostname=\"h\",} 1.0\n"));
        assertTrue(t.contains("# TYPE ts_queue_latency_microseconds counter"));
        assertFalse(t.contains("Requests2XX"));
        assertEquals(1, lines("ts_metrics.log").size());
        assertTrue(lines("ts_metrics.log").get(0).contains("Requests2XX.Count:1.0"));
    }

    @Test
    public void metricsMissingFromTheConfigAreNotRecorded() throws IOException {
        MetricsConfig c = MetricsConfig.parse("ts_metrics:\n  counter:\n    - name: Requests2XX\n      unit: Count\n"
            + "      dimensions: [Level]\n", "t");
        MetricsRegistry r = new MetricsRegistry(c, MetricsMode.PROMETHEUS, "h", false, false);
        r.requestReceived("m", null);
        r.responseSent(201);
        assertEquals("# HELP Requests2XX Torchserve prometheus counter metric with unit: Count\n"
            + "# TYPE Requests2XX counter\nRequests2XX{Level=\"Host\",} 1.0\n", r.scrape(null));
    }

    @Test
    public void modeParsing() {
        assertEquals(MetricsMode.PROMETHEUS, MetricsMode.parse("Prometheus"));
        assertEquals(MetricsMode.LEGACY, MetricsMode.parse("legacy"));
        assertEquals(MetricsMode.LOG, MetricsMode.parse("log"));
        assertEquals(MetricsMode.LOG, MetricsMode.parse("bogus"));
    }
}

package org.tserve.metrics;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;

import io.netty.handler.codec.http.DefaultFullHttpRequest;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpVersion;
import java.nio.charset.StandardCharsets;
import org.junit.After;
import org.junit.Before;
import org.junit.Test;
import org.tserve.config.Compatibility;

/** GET /metrics as the metrics connector hands it over: the format follows Accept, and the switch. */
public class MetricsExtensionTest {
    private static final String TEXT = "# HELP Requests2XX Torchserve prometheus counter metric with unit: Count\n"
        + "# TYPE Requests2XX counter\nRequests2XX{Level=\"Host\",} 1.0\n";
    private static final String OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    private MetricsRegistry previous;

    @Before
    public void install() {
        previous = MetricsRegistry.get();
        MetricsConfig c = MetricsConfig.parse("ts_metrics:\n  counter:\n    - name: Requests2XX\n      unit: Count\n"
            + "      dimensions: [Level]\n", "t");
        MetricsRegistry r = new MetricsRegistry(c, MetricsMode.PROMETHEUS, "h", false, false);
        r.responseSent(200);
        MetricsRegistry.install(r);
    }

    @After
    public void restore() {
        MetricsRegistry.install(previous);
        Compatibility.install(Compatibility.TSERVE);
    }

    private static FullHttpResponse get(String uri, String accept) {
        FullHttpRequest req = new DefaultFullHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.GET, uri);
        if (accept != null) {
            req.headers().set(HttpHeaderNames.ACCEPT, accept);
        }
        return new MetricsExtension(true).handleMetricsRequest(req);
    }

    private static String body(FullHttpResponse r) {
        String s = r.content().toString(StandardCharsets.UTF_8);
        r.release();
        return s;
    }

    @Test
    public void withoutMetricsNegotiationEveryAcceptGetsTorchServesText() {
        FullHttpRequest req = new DefaultFullHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.GET, "/metrics");
        req.headers().set(HttpHeaderNames.ACCEPT, OPENMETRICS);
        FullHttpResponse r = new MetricsExtension().handleMetricsRequest(req);
        assertEquals(PrometheusWriter.CONTENT_TYPE, r.headers().get(HttpHeaderNames.CONTENT_TYPE));
        assertEquals(TEXT, body(r));
    }

    @Test
    public void withoutAcceptTheAnswerIsTorchServesText() {
        FullHttpResponse r = get("/metrics", null);
        assertEquals(PrometheusWriter.CONTENT_TYPE, r.headers().get(HttpHeaderNames.CONTENT_TYPE));
        assertEquals(TEXT, body(r));
    }

    @Test
    public void openMetricsWhenAsked() {
        FullHttpResponse r = get("/metrics?name[]=Requests2XX", OPENMETRICS);
        assertEquals(OPENMETRICS, r.headers().get(HttpHeaderNames.CONTENT_TYPE));
        String text = body(r);
        assertEquals(text, "# TYPE Requests2XX counter\n"
            + "# HELP Requests2XX Torchserve prometheus counter metric with unit: Count\n"
            + "Requests2XX_total{Level=\"Host\"} 1.0\n# EOF\n", text);
        assertEquals("# EOF\n", body(get("/metrics?name[]=Other", OPENMETRICS)));
    }

    @Test
    public void theTorchServeSwitchAnswersTextWhateverTheAccept() {
        Compatibility.install(Compatibility.TORCHSERVE_0_12);
        FullHttpResponse r = get("/metrics", OPENMETRICS);
        assertEquals(PrometheusWriter.CONTENT_TYPE, r.headers().get(HttpHeaderNames.CONTENT_TYPE));
        assertEquals(TEXT, body(r));
    }

    @Test
    public void otherPathsAreNotMetrics() {
        assertNull(get("/metricsx", null));
    }
}

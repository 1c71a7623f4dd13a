package org.tserve.metrics;

import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.QueryStringDecoder;
import io.prometheus.metrics.expositionformats.ExpositionFormatWriter;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.tserve.config.Compatibility;
import org.tserve.server.ServerContext;
import org.tserve.server.ServerExtension;
import org.tserve.wlm.api.WlmListener;

/**
 * Plugs metrics into the server: installs the {@link MetricsRegistry} (metrics.yaml, metrics_mode,
 * TS_METRICS and MODEL_METRICS log lines), listens to the workload manager (job latencies, worker loads,
 * METRICS frames) and serves {@code GET /metrics[?name[]=..]} on the metrics connector (TorchServe's
 * Prometheus text, or what {@link ClientJavaExposition} negotiates from {@code Accept}).
 */
public final class MetricsExtension implements ServerExtension {
    /** metrics_negotiation: off by default, so Prometheus stores TorchServe's series names (docs/metrics.md). */
    private volatile boolean negotiate;

    public MetricsExtension() {
    }

    MetricsExtension(boolean negotiate) {
        this.negotiate = negotiate;
    }

    @Override
    public void start(ServerContext ctx) {
        negotiate = ctx.config().getBool("metrics_negotiation");
        MetricsRegistry r = MetricsSetup.start(ctx.config());
        ctx.responses().add(r::responseSent);
        ctx.modelManager().addListener(new WlmListener() {
            @Override
            public void onInferenceSubmitted(String model, String version) {
                r.requestReceived(model, version);   // ts_inference_requests_total
            }

            @Override
            public void onJobDone(String model, String version, int status, long queueNanos, long backendNanos) {
                r.inferenceCompleted(model, version, (queueNanos + backendNanos) / 1000, queueNanos / 1000);
            }

            @Override
            public void onHandlerMetrics(String model, String version, String workerId, String json) {
                r.backendMetrics(model, workerId, json);
            }

            @Override
            public void onWorkerThreadTime(String model, String version, String workerName, long nanos) {
                r.workerThreadNanos(nanos);
            }

            @Override
            public void onWorkerLoaded(String model, String version, String workerName, long millis) {
                r.workerLoaded(workerName, millis);
            }
        });
    }

    @Override
    public void stop() {
        MetricsSetup.stop();
    }

    @Override
    public FullHttpResponse handleMetricsRequest(FullHttpRequest request) {
        QueryStringDecoder q = new QueryStringDecoder(request.uri());
        String path = q.path();
        while (path.endsWith("/") && path.length() > 1) {
            path = path.substring(0, path.length() - 1);
        }
        if (!path.equals("/metrics")) {
            return null;
        }
        Set<String> names = new HashSet<>();
        for (String key : new String[] {"name[]", "name"}) {
            List<String> v = q.parameters().get(key);
            if (v != null) {
                names.addAll(v);
            }
        }
        // with metrics_negotiation, OpenMetrics or protobuf when the scraper asks for it (client_java);
        // else TorchServe's text 0.0.4, which is all TorchServe 0.12 answers (compatibility=torchserve-0.12)
        String accept = request.headers().get(HttpHeaderNames.ACCEPT);
        ExpositionFormatWriter negotiated = negotiate && Compatibility.current().negotiatesMetricsFormat()
            ? ClientJavaExposition.negotiate(accept) : null;
        MetricsRegistry registry = MetricsRegistry.get();
        byte[] body = negotiated == null
            ? registry.scrape(names).getBytes(StandardCharsets.UTF_8)
            : ClientJavaExposition.write(negotiated, registry.families(names), accept);
        FullHttpResponse resp = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK,
            Unpooled.wrappedBuffer(body));
        resp.headers().set(HttpHeaderNames.CONTENT_TYPE,
            negotiated == null ? PrometheusWriter.CONTENT_TYPE : negotiated.getContentType());
        resp.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, body.length);
        return resp;
    }
}

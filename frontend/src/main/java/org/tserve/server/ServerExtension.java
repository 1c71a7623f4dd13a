package org.tserve.server;

import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;

/**
 * A part of the server that lives outside the REST core (gRPC servers, metrics). Found with
 * {@link java.util.ServiceLoader}: list the implementation class in
 * {@code frontend/src/main/resources/META-INF/services/org.tserve.server.ServerExtension}.
 * Lifecycle: {@link #start} after the model manager exists and before startup models load
 * (throw to abort startup with a clear message), {@link #stop} at shutdown, before workers stop.
 */
public interface ServerExtension {
    /** Starts the extension (bind ports, register WlmListeners on ctx.modelManager()). */
    void start(ServerContext ctx) throws Exception;

    /** Stops accepting requests; called once at shutdown. */
    void stop();

    /**
     * Handles a request on the metrics connector ({@code metrics_address}), e.g. {@code GET /metrics}.
     * Return null when this extension does not serve that path (the next one is asked, then 404).
     * Called on a Netty event loop: do not block.
     */
    default FullHttpResponse handleMetricsRequest(FullHttpRequest request) {
        return null;
    }

    /** Lines for the startup banner (e.g. "gRPC inference address: ..."), may be empty. */
    default java.util.List<String> bannerLines() {
        return java.util.List.of();
    }
}

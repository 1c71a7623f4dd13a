package org.tserve.wlm;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.tserve.wlm.api.JobResponder;
import org.tserve.wlm.api.Response;

/** What a job received: its chunks, its result or its error (a test double of an HTTP responder). */
public final class CollectingResponder implements JobResponder {
    public final List<String> chunks = new ArrayList<>();
    public final CompletableFuture<Response> result = new CompletableFuture<>();
    public final CompletableFuture<String> error = new CompletableFuture<>();
    public volatile int errorStatus;

    @Override
    public synchronized void onChunk(Response chunk) {
        chunks.add(new String(chunk.body(), StandardCharsets.UTF_8));
    }

    @Override
    public void onResult(Response r) {
        result.complete(r);
        error.complete(null);
    }

    @Override
    public void onError(int status, String message) {
        errorStatus = status;
        error.complete(message);
        result.complete(null);
    }
}

package org.tserve.workflow;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.logging.log4j.Logger;
import org.tserve.util.Json;
import org.tserve.util.Logging;
import org.tserve.wlm.api.Header;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.JobResponder;
import org.tserve.wlm.api.Part;
import org.tserve.wlm.api.Response;
import org.tserve.wlm.api.WlmException;

/**
 * Runs one workflow request through its DAG. Every node is an ordinary {@link Job} of the node's
 * model, so it waits in that model's queue, is batched with other requests, and is counted in
 * the metrics. A node starts as soon as all its parents have answered (nodes that do not depend
 * on each other run concurrently); nothing blocks a thread while nodes run.
 *
 * <p>Inputs as TorchServe gives them: a start node gets the request's own inputs; a node with
 * one parent gets that parent's output as {@code body}; a node with several parents gets one
 * input per parent, named after it (the handler sees a dict node name → output bytes). The
 * answer is the single leaf's output, or a JSON object leaf name → output when there are several.
 * A node answering 5xx or timing out ({@code timeout-ms}) is tried again up to
 * {@code retry-attempts} times; a node that still fails ends the request with its status and a
 * message naming the node. The client is answered exactly once. A client that goes away
 * ({@link #cancel}) starts no further node and cancels the node jobs in flight (freeing what their
 * models allow: a queue slot, a sequence in a continuous worker).
 */
public final class WorkflowExecutor {
    private static final Logger LOG = Logging.logger(WorkflowExecutor.class);

    /** Where node jobs go: the model manager's submit (counted in the metrics by the caller's choice). */
    public interface JobSink {
        void submit(Job job) throws WlmException;
    }

    private final Workflow wf;
    private final JobSink sink;
    private final String requestId;
    private final List<Header> headers;
    private final JobResponder client;
    private final AtomicBoolean answered = new AtomicBoolean();
    /** Guarded by this: parents still to answer, inputs gathered so far, leaf outputs. */
    private final Map<String, Integer> waitingFor = new HashMap<>();
    private final Map<String, List<Part>> inputs = new HashMap<>();
    private final Map<String, Response> leaves = new LinkedHashMap<>();
    private final int leafCount;
    /** Node jobs submitted and not yet answered: what {@link #cancel} cancels. */
    private final Set<Job> inFlight = ConcurrentHashMap.newKeySet();

    private WorkflowExecutor(Workflow wf, JobSink sink, String requestId, List<Header> headers, JobResponder client) {
        this.wf = wf;
        this.sink = sink;
        this.requestId = requestId;
        this.headers = headers;
        this.client = client;
        int n = 0;
        for (String node : wf.spec().nodes().keySet()) {
            waitingFor.put(node, wf.spec().parents(node).size());
            n += wf.spec().children(node).isEmpty() ? 1 : 0;
        }
        this.leafCount = n;
    }

    /**
     * Starts the request; {@code client} gets the one answer (onResult or onError) later, on another
     * thread. The returned run is what {@link #cancel} stops.
     */
    public static WorkflowExecutor run(Workflow wf, JobSink sink, String requestId, List<Header> headers,
                                       List<Part> parts, JobResponder client) {
        WorkflowExecutor run = new WorkflowExecutor(wf, sink, requestId, headers, client);
        for (String node : wf.spec().nodes().keySet()) {
            if (wf.spec().parents(node).isEmpty()) {
                run.start(node, parts, 0);
            }
        }
        return run;
    }

    /**
     * The client went away: answers 499 (nobody reads it), starts no further node and cancels the
     * node jobs in flight. Returns false when the request was answered already.
     */
    public boolean cancel() {
        if (!answered.compareAndSet(false, true)) {
            return false;
        }
        LOG.info("Workflow " + wf.name() + " request " + requestId + ": client closed the connection; "
                + inFlight.size() + " node job(s) cancelled, no further node started");
        client.onError(499, "Client closed the request before it was answered");
        for (Job job : inFlight) {
            job.cancel();
        }
        return true;
    }

    private void start(String node, List<Part> parts, int attempt) {
        if (answered.get()) {
            return;
        }
        WorkflowSpec.Node spec = wf.spec().nodes().get(node);
        CompletableFuture<Response> answer = new CompletableFuture<>();
        Job job = new Job(requestId + ":" + node, wf.modelName(node), null, headers, parts, new NodeResponder(answer));
        inFlight.add(job);
        try {
            sink.submit(job);
        } catch (WlmException e) {
            inFlight.remove(job);
            fail(node, e.getStatus(), e.getMessage());
            return;
        }
        if (answered.get()) {
            job.cancel();   // cancelled while it was being submitted
        }
        answer.orTimeout(spec.timeoutMs(), TimeUnit.MILLISECONDS).whenComplete((r, err) -> {
            inFlight.remove(job);
            if (err != null) {
                job.cancel();   // frees its queue slot where the model allows; its late answer is dropped
            }
            int status = err != null ? 504 : r.status();
            if (status < 400) {
                done(node, r);
            } else if (attempt < spec.retryAttempts() && (status >= 500) && !answered.get()) {
                LOG.warn("Workflow " + wf.name() + " node " + node + " failed (" + status + "), attempt "
                        + (attempt + 1) + " of " + (spec.retryAttempts() + 1) + "; retrying");
                start(node, parts, attempt + 1);
            } else {
                fail(node, status, err instanceof TimeoutException || (err != null && err.getCause() instanceof TimeoutException)
                        ? "timed out after " + spec.timeoutMs() + " ms (timeout-ms)" : message(r, err));
            }
        });
    }

    private static String message(Response r, Throwable err) {
        if (err != null) {
            return String.valueOf(err);
        }
        if (!r.message().isEmpty()) {
            return r.message();
        }
        return r.body().length > 0 ? new String(r.body(), StandardCharsets.UTF_8) : r.message();
    }

    /** A node answered: feed its children (starting those now complete), or keep it as a leaf. */
    private void done(String node, Response r) {
        List<String> ready = new ArrayList<>();
        boolean allLeaves;
        synchronized (this) {
            List<String> children = wf.spec().children(node);
            if (children.isEmpty()) {
                leaves.put(node, r);
            }
            for (String c : children) {
                String input = wf.spec().parents(c).size() == 1 ? "body" : node;
                inputs.computeIfAbsent(c, k -> new ArrayList<>()).add(new Part(input, "", r.body()));
                if (waitingFor.merge(c, -1, Integer::sum) == 0) {
                    ready.add(c);
                }
            }
            allLeaves = leaves.size() == leafCount && children.isEmpty();
        }
        for (String c : ready) {
            List<Part> parts;
            synchronized (this) {
                parts = inputs.remove(c);
            }
            start(c, parts, 0);
        }
        if (allLeaves && answered.compareAndSet(false, true)) {
            client.onResult(answer());
        }
    }

    private synchronized Response answer() {
        if (leaves.size() == 1) {
            Response r = leaves.values().iterator().next();
            String ct = r.contentType().isEmpty() ? "application/json" : r.contentType();
            return new Response(requestId, 200, "OK", ct, List.of(), r.body());
        }
        JsonObject o = new JsonObject();
        leaves.forEach((node, r) -> o.add(node, jsonOrText(r.body())));
        return new Response(requestId, 200, "OK", "application/json", List.of(),
                o.toString().getBytes(StandardCharsets.UTF_8));
    }

    private static JsonElement jsonOrText(byte[] body) {
        String text = new String(body, StandardCharsets.UTF_8);
        try {
            return Json.parse(text);
        } catch (RuntimeException e) {
            return new JsonPrimitive(text);
        }
    }

    private void fail(String node, int status, String message) {
        if (answered.compareAndSet(false, true)) {
            LOG.warn("Workflow " + wf.name() + " node " + node + " failed (" + status + "): " + message);
            client.onError(status, "Workflow " + wf.name() + ": node " + node + " failed: " + message);
        }
    }

    /**
     * Completes the node's future with its whole output (a streaming node's chunks joined); errors
     * become a Response with that status.
     */
    private static final class NodeResponder implements JobResponder {
        private final CompletableFuture<Response> answer;
        private final java.io.ByteArrayOutputStream chunks = new java.io.ByteArrayOutputStream();

        NodeResponder(CompletableFuture<Response> answer) {
            this.answer = answer;
        }

        @Override
        public void onChunk(Response chunk) {
            chunks.writeBytes(chunk.body());
        }

        @Override
        public void onResult(Response result) {
            if (chunks.size() > 0 && result.status() < 400) {
                chunks.writeBytes(result.body());
                result = new Response(result.requestId(), result.status(), result.message(), result.contentType(),
                        result.headers(), chunks.toByteArray());
            }
            answer.complete(result);
        }

        @Override
        public void onError(int status, String message) {
            answer.complete(new Response("", status, message, "", List.of(), new byte[0]));
        }
    }
}

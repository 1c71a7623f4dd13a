package org.tserve.wlm.api;

import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import org.tserve.util.Ids;

/**
 * One inference (or customized describe) request for a model version. Create it with the request
 * headers and parts, hand it to {@code ModelManager.submit(Job)}; the responder is answered
 * exactly once.
 */
public final class Job {
    /**
     * The client reads a stream (gRPC StreamPredictions/StreamPredictions2, OIP generate_stream): a
     * handler that can stream (the LLM handler) streams unless the body says {@code "stream": false}.
     */
    public static final Header STREAM_HINT = new Header("x-tserve-stream", "true");
    private static final String CLIENT_GONE = "Client closed the request before it was answered";

    /** What the worker is asked to do. */
    public enum Kind { INFERENCE, DESCRIBE }

    private final String id;
    private final Kind kind;
    private final String modelName;
    private final String version;
    private volatile List<Header> headers;
    /** Headers the frontend adds to the answer (a stateful model's sequence id). */
    private volatile List<Header> answerHeaders = List.of();
    private volatile Runnable onDone;
    private final List<Part> parts;
    private final JobResponder responder;
    private Runnable canceller;   // guarded by this, with cancelRequested and heldByWorker
    private boolean cancelRequested;
    /** Written to a worker that cannot cancel it: only that worker's answer ends the job. */
    private boolean heldByWorker;
    /** The client went away while a worker held the job: it was told 499, the worker's answer is dropped. */
    private volatile boolean clientGone;
    /** The final answer's headers (the handler's), empty before. */
    private volatile List<Header> resultHeaders = List.of();
    private final long createdNanos = System.nanoTime();
    private volatile long dispatchedNanos;
    private volatile long doneNanos;
    private final AtomicBoolean done = new AtomicBoolean();

    /**
     * @param modelName model to run
     * @param version model version, or null for the default version
     * @param headers request headers as received, plus the frontend's own (url_path, explain)
     * @param parts the request's inputs ({@code body}, form or multipart fields)
     */
    public Job(String modelName, String version, List<Header> headers, List<Part> parts, JobResponder responder) {
        this(Ids.fastUuid(), Kind.INFERENCE, modelName, version, headers, parts, responder);
    }

    /** Same, with the request id the handler sees (e.g. the HTTP response's x-request-id). */
    public Job(String id, String modelName, String version, List<Header> headers, List<Part> parts,
               JobResponder responder) {
        this(id, Kind.INFERENCE, modelName, version, headers, parts, responder);
    }

    private Job(String id, Kind kind, String modelName, String version, List<Header> headers, List<Part> parts,
                JobResponder responder) {
        this.id = id;
        this.kind = kind;
        this.modelName = modelName;
        this.version = version;
        this.headers = List.copyOf(headers);   // one copy; a list that is already immutable is kept
        this.parts = List.copyOf(parts);
        this.responder = responder;
    }

    /** A customized-describe job: header {@code describe: True}, no inputs, always a batch of one. */
    public static Job describe(String modelName, String version, JobResponder responder) {
        return new Job(Ids.fastUuid(), Kind.DESCRIBE, modelName, version,
                List.of(new Header("describe", "True")), List.of(), responder);
    }

    public String getId() {
        return id;
    }

    public Kind getKind() {
        return kind;
    }

    public String getModelName() {
        return modelName;
    }

    /** The requested version, or null for the default one. */
    public String getVersion() {
        return version;
    }

    public List<Header> getHeaders() {
        return headers;
    }

    public List<Part> getParts() {
        return parts;
    }

    public long getCreatedNanos() {
        return createdNanos;
    }

    public long getDispatchedNanos() {
        return dispatchedNanos;
    }

    public void markDispatched() {
        dispatchedNanos = System.nanoTime();
    }

    /** True once the final answer was given. */
    public boolean isDone() {
        return done.get();
    }

    public void chunk(Response r) {
        if (!done.get() && !clientGone) {
            responder.onChunk(withAnswerHeaders(r));   // a stream's first chunk carries the headers
        }
    }

    /**
     * {@code r} with the frontend's answer headers (a stateful model's sequence id) added, unless
     * the handler set that header itself (TorchServe's stateful handlers echo the sequence id):
     * the client gets it once.
     */
    private Response withAnswerHeaders(Response r) {
        List<Header> extra = answerHeaders;
        if (extra.isEmpty()) {
            return r;
        }
        List<Header> hs = new java.util.ArrayList<>(r.headers());
        for (Header h : extra) {
            if (r.headers().stream().noneMatch(x -> x.name().equalsIgnoreCase(h.name()))) {
                hs.add(h);
            }
        }
        return new Response(r.requestId(), r.status(), r.message(), r.contentType(), hs, r.body());
    }

    /** When the final answer was given (System.nanoTime), 0 before. */
    public long getDoneNanos() {
        return doneNanos;
    }

    public boolean result(Response r) {
        if (done.compareAndSet(false, true)) {
            doneNanos = System.nanoTime();
            resultHeaders = r.headers();
            if (!clientGone) {
                responder.onResult(withAnswerHeaders(r));
            }
            finished();
            return true;
        }
        return false;
    }

    /** The first request header named {@code name} (case-insensitive), or null. */
    public String header(String name) {
        for (Header h : headers) {
            if (h.name().equalsIgnoreCase(name)) {
                return h.value();
            }
        }
        return null;
    }

    /**
     * The values of the final answer's headers named {@code name} (case-insensitive), each split
     * at {@code ;} (TorchServe's {@code ts_request_sequence_end: <id>[;<id>...]}); empty when none.
     */
    public List<String> resultHeaderValues(String name) {
        List<String> out = new java.util.ArrayList<>();
        for (Header h : resultHeaders) {
            if (h.name().equalsIgnoreCase(name)) {
                for (String v : h.value().split(";")) {
                    if (!v.isBlank()) {
                        out.add(v.strip());
                    }
                }
            }
        }
        return out;
    }

    /** Adds request headers the handler will see (before the job is dispatched). */
    public void addHeaders(List<Header> more) {
        List<Header> all = new java.util.ArrayList<>(headers);
        all.addAll(more);
        headers = List.copyOf(all);
    }

    /** Adds a header to the successful answer (the client learns its sequence id). */
    public void addAnswerHeader(Header h) {
        List<Header> all = new java.util.ArrayList<>(answerHeaders);
        all.add(h);
        answerHeaders = List.copyOf(all);
    }

    /** Runs once the job has been answered, whichever way (a sequence's next request may go). */
    public void onDone(Runnable r) {
        onDone = r;
    }

    private void finished() {
        Runnable r = onDone;
        if (r != null) {
            r.run();
        }
    }

    /**
     * What {@link #cancel} does where the job is now (queued: leave the queue; in flight: CANCEL to
     * the worker). Set once the job is where {@code canceller} frees it: a cancel that came while
     * it moved there runs the new canceller now (a CANCEL then follows its INFERENCE on the wire).
     */
    public void onCancel(Runnable canceller) {
        boolean runNow;
        synchronized (this) {
            this.canceller = canceller;
            runNow = cancelRequested && canceller != null;
        }
        if (runNow) {
            canceller.run();
        }
    }

    /**
     * The job was written to a worker whose model cannot cancel a running request (no continuous
     * batching): a client that goes away is told 499 at once, but the job ends only with the
     * worker's answer — so a stateful sequence's next request never runs beside this one in the
     * worker (a preprocess pool holds several batches).
     */
    public synchronized void heldByWorker() {
        canceller = null;
        heldByWorker = true;
    }

    /** Whether {@link #cancel} frees anything (the model takes cancellations). */
    public synchronized boolean isCancellable() {
        return canceller != null;
    }

    /**
     * The client went away before its answer: answers 499 (nobody reads it) and, for a model that
     * takes cancellations (continuous batching), frees the job's place — its queue slot, or its
     * sequence in the worker. Returns false when the job was answered already.
     */
    public boolean cancel() {
        Runnable c;
        boolean workerHolds;
        synchronized (this) {
            if (done.get() || clientGone) {
                return false;
            }
            workerHolds = heldByWorker;
            if (workerHolds) {
                clientGone = true;
            } else {
                cancelRequested = true;
            }
            c = canceller;
        }
        if (workerHolds) {   // the answer the client never reads; the job stays the worker's until it answers
            responder.onError(499, CLIENT_GONE);
            return true;
        }
        // Free its place before answering: answering lets a stateful sequence's next request go,
        // which must reach the worker after this one's CANCEL, never beside the cancelled request.
        if (c != null) {
            c.run();
        }
        return fail(499, CLIENT_GONE);
    }

    /** Fails the job unless it was already answered; returns whether this call answered it. */
    public boolean fail(int status, String message) {
        if (done.compareAndSet(false, true)) {
            doneNanos = System.nanoTime();
            if (!clientGone) {
                responder.onError(status, message);
            }
            finished();
            return true;
        }
        return false;
    }
}

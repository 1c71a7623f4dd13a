package org.tserve.wlm.api;


/**
 * Receives the answer of one {@link Job}. Exactly one of {@link #onResult} or {@link #onError} is
 * called, once; {@link #onChunk} may be called before it (streaming handlers). Calls for one job
 * come in order from one thread at a time; implementations must not block.
 */
public interface JobResponder {
    /** An intermediate piece of a streaming answer (status, content type, headers, body). */
    void onChunk(Response chunk);

    /** The final answer from the handler; {@code status() >= 400} when the handler reported an error. */
    void onResult(Response result);

    /** The frontend could not get an answer (no worker, worker died, timeout, unregistered, shutdown). */
    void onError(int status, String message);
}

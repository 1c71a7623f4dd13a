package org.tserve.wlm.api;

/** Observes the workload manager (metrics). Called on worker threads: return quickly. */
public interface WlmListener {
    /**
     * An inference job for a model version that exists was queued, or refused with 503 (queue full, no
     * worker); {@code version} is the one the request named (null for the default version).
     */
    default void onInferenceSubmitted(String model, String version) {
    }

    /**
     * A job got its final answer from a backend.
     *
     * @param version the version the request named, null when it named none (TorchServe labels
     *     its latencies with that: {@code model_version="default"}, as the request counter)
     * @param queueNanos time from submit until its batch was written to the worker
     * @param backendNanos time from then until the final answer
     */
    default void onJobDone(String model, String version, int status, long queueNanos, long backendNanos) {
    }

    /** A METRICS frame (handler metrics, a JSON list) from a worker. */
    default void onHandlerMetrics(String model, String version, String workerId, String json) {
    }

    /** A batch cost its worker thread {@code nanos} outside the backend (encode and write, decode and answer). */
    default void onWorkerThreadTime(String model, String version, String workerName, long nanos) {
    }

    /** A worker ({@code W-<port>-<model>_<version>}) loaded its model, {@code millis} after its process started. */
    default void onWorkerLoaded(String model, String version, String workerName, long millis) {
    }
}

package org.tserve.wlm;

/** Observes the workload manager (metrics). Called on worker threads: return quickly. */
public interface WlmListener {
    /**
     * A job got its final answer from a backend.
     *
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

package org.tserve.wlm;

/**
 * One worker as the describe API shows it. {@code pong} is the backend's PONG json (pipeline
 * {@code stages}, {@code poolPids}), null when it did not answer.
 */
public record WorkerDescription(String id, long startTimeMillis, WorkerState state, long memoryUsage, long pid,
                                boolean gpu, int gpuId, String pong) {
}

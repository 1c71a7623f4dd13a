package org.tserve.wlm;

/** One worker as the describe API shows it. */
public record WorkerDescription(String id, long startTimeMillis, WorkerState state, long memoryUsage, long pid,
                                boolean gpu, int gpuId) {
}

package org.tserve.wlm.api;

import java.util.List;

/**
 * One worker as the describe API shows it; {@code ranks} is empty for a plain worker. {@code pong}
 * is the backend's PONG json (pipeline {@code stages}, {@code poolPids}), null when it did not answer;
 * {@code nodes} the json array of every node of a job across machines (null on one machine);
 * {@code startup} the json of its latest start's steps ({@code StartupTimeline}, null before the first).
 */
public record WorkerDescription(String id, long startTimeMillis, WorkerState state, long memoryUsage, long pid,
                                boolean gpu, int gpuId, List<RankDescription> ranks, String pong,
                                String nodes, String startup) {
}

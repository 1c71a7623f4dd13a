package org.tserve.wlm.supervision;

import java.util.concurrent.ScheduledExecutorService;
import org.tserve.wlm.api.WlmListener;

/**
 * What a worker needs from the server it runs in, handed down when it is made (never looked up
 * through the facade): how to launch a backend, the timer its response-timeout sweep runs on, the
 * longest frame it reads from a backend, and where it reports loads, answers and handler metrics.
 *
 * @param env how backends are launched (python, sockets, warm starts)
 * @param scheduler the server's timer thread
 * @param maxResponseSize max_response_size: a longer frame from a backend kills its link
 * @param events the listeners (metrics) that hear the workers' events
 */
public record WorkerContext(WorkerEnvironment env, ScheduledExecutorService scheduler, long maxResponseSize,
                            WlmListener events) {
}

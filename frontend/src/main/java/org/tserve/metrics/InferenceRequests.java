package org.tserve.metrics;

import org.tserve.wlm.Job;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.WlmException;

/**
 * Submits an inference job and counts it in {@code ts_inference_requests_total} once the model
 * version was found: a name or version no model has (404) creates no series and no metric log
 * line, so clients cannot grow the metrics with names of their choosing.
 */
public final class InferenceRequests {
    private InferenceRequests() {
    }

    /** {@link ModelManager#submit}, then the count; a refused job of a known model (503) counts too. */
    public static void submit(ModelManager models, Job job) throws WlmException {
        try {
            models.submit(job);
        } catch (WlmException e) {
            if (e.getStatus() != 404 && e.getStatus() != 400) {
                MetricsRegistry.get().requestReceived(job.getModelName(), job.getVersion());
            }
            throw e;
        }
        MetricsRegistry.get().requestReceived(job.getModelName(), job.getVersion());
    }
}

package org.tserve.wlm.supervision;

import org.apache.logging.log4j.Logger;
import org.tserve.config.Compatibility;
import org.tserve.util.Logging;

/**
 * The worker lifecycle lines that scripts read from the server's log (and TorchServe 0.12's own
 * integration tests read from the launcher's stdout): a failed load, a lost worker, a restart, a
 * response or startup timeout. tserve's lines name the cause and the worker's last output; with
 * {@code compatibility=torchserve-0.12} ({@link Compatibility#torchServeLogWording()}) they read
 * as TorchServe's, which repeat no worker output — a script that reads a worker's traceback up to
 * its last line finds it once, not again in the frontend's line after it.
 */
final class WorkerLog {
    // TorchServe's line that follows "Backend worker error" (its exception's first line), which
    // its scripts and tests match as a whole
    static final String NO_RESPONSE =
            "org.pytorch.serve.wlm.WorkerInitializationException: Backend worker did not respond in given time";
    private static final Logger LOG = Logging.logger(WorkerThread.class);

    private WorkerLog() {
    }

    private static boolean torchServe() {
        return Compatibility.current().torchServeLogWording();
    }

    /** The worker refused or failed to load the model; {@code tserveLine} names why and its output. */
    static void loadFailed(String worker, String model, String tserveLine) {
        if (torchServe()) {
            LOG.warn(worker + ": Load model failed: " + model + ", error: Worker died.");
        } else {
            LOG.error(worker + ": " + tserveLine);
        }
    }

    /** A worker process ended unasked; {@code loaded}: it had loaded its model. */
    static void workerFailed(String worker, String failure, Integer exit, boolean loaded) {
        if (torchServe()) {
            LOG.info(worker + ": Worker disconnected. " + (loaded ? "WORKER_MODEL_LOADED" : "WORKER_STARTED"));
        } else {
            LOG.warn(worker + ": worker failed: " + failure + (exit == null ? "" : " (exit status " + exit + ")"));
        }
    }

    static void retry(String worker, int port, int delaySeconds, String failure) {
        LOG.warn(worker + ": Retry worker: " + port + " in " + delaySeconds + " seconds."
                + (torchServe() ? "" : " (" + failure + ")"));
    }

    /** A batch ran past its responseTimeout; {@code inARow}: timeouts since the last answer. */
    static void responseTimeout(String worker, String tserveLine, int inARow) {
        if (torchServe()) {
            LOG.error(worker + ": Number or consecutive unsuccessful inference " + inARow);
            backendWorkerError(worker);
        } else {
            LOG.warn(worker + ": " + tserveLine);
        }
    }

    /** The model did not load within startupTimeout (tserve's line is workerFailed's). */
    static void startupTimeout(String worker) {
        if (torchServe()) {
            backendWorkerError(worker);
        }
    }

    /** The worker is serving again after a failure (the same wording either way). */
    static void recovered(String worker) {
        LOG.info(worker + ": Auto recovery succeeded, reset recoveryStartTS");
    }

    private static void backendWorkerError(String worker) {
        LOG.error(worker + ": Backend worker error");
        LOG.error(worker + ": " + NO_RESPONSE);
    }
}

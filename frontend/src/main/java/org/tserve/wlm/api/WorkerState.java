package org.tserve.wlm.api;


/** Lifecycle of one backend worker. */
public enum WorkerState {
    /** Process launched, connecting or loading the model. */
    STARTING,
    /** Model loaded, serving batches. */
    READY,
    /** Failed; waiting for its backoff before restarting. */
    RESTARTING,
    /** Scaled down or gave up; not coming back. */
    STOPPED
}

/**
 * Supervision: one {@link org.tserve.wlm.supervision.WorkerThread} per backend process (start, restart with
 * backoff, health, scale up and down by {@link org.tserve.wlm.supervision.WorkerScaler}), the processes themselves and
 * their trees, torchrun rank groups, and warm starts from the zygote.
 */
package org.tserve.wlm.supervision;

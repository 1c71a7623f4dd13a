/**
 * Supervision: one {@link org.tserve.wlm.supervision.WorkerThread} per backend process (start, restart with
 * backoff, health, scale up and down by {@link org.tserve.wlm.supervision.WorkerScaler}), the processes themselves and
 * their trees, torchrun rank groups, warm starts from the zygote, and a worker's part in a job across machines
 * ({@link org.tserve.wlm.supervision.NodeRole}: leader or member; the leader's
 * {@link org.tserve.wlm.supervision.RemoteNodes} and {@link org.tserve.wlm.supervision.MemberClient}).
 *
 * <p>Its edges: a worker is given a {@link org.tserve.wlm.supervision.WorkerContext} by the server; it sees its
 * model as a {@link org.tserve.wlm.supervision.ServedModel} (the registry's model extends it), and the rooms above
 * see a worker as a {@link org.tserve.wlm.supervision.Worker}. It uses batching, link, protocol and api only.
 */
package org.tserve.wlm.supervision;

package org.tserve.wlm.api;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;

/**
 * This node as a member of jobs across machines (docs/distributed.md, "Across machines"): the
 * parts of its leaders' jobs that run here, as the member's {@code /cluster} API starts, polls,
 * lists and stops them. JSON in and out: the leader's spec and the parts' states are the wire format.
 */
public interface ClusterMember {
    /** True when this server was started as a member ({@code cluster_leader} / {@code --member-of}). */
    boolean enabled();

    /**
     * Starts this node's part of a job from the leader's spec; a part of the same id still running
     * is stopped first (a leader that restarted).
     *
     * @throws WlmException 400 bad spec or settings, 404 archive not here, 409 other version,
     *     507 not enough devices, 503 no ports
     */
    JsonObject start(JsonObject spec) throws WlmException;

    /** This node's part of job {@code id}; 404 when there is none. */
    JsonObject state(String id) throws WlmException;

    /** Every part on this node. */
    JsonArray list();

    /** Stops job {@code id}'s part and waits for its ranks; null when there was none. */
    JsonObject stop(String id);
}

/**
 * The link to one backend: a {@link org.tserve.wlm.link.RankConnection} per rank socket (frames out and in),
 * the {@link org.tserve.wlm.link.BackendLink} over all of a lifetime's ranks (ordered writes, the permits of the
 * batches in flight, LOADED waits, the shared PING, dying once) and a worker's
 * {@link org.tserve.wlm.link.BackendStatus} answers. Knows frames ({@code wlm.protocol}), not models or batches.
 */
package org.tserve.wlm.link;

/**
 * Multi-node models: the leader and member roles of a node ({@link org.tserve.wlm.multinode.NodeRole}), the remote
 * nodes a leader watches, the jobs a member runs for its leader, and the client a leader calls members with.
 */
package org.tserve.wlm.multinode;

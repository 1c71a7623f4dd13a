/**
 * A member node's side of jobs across machines: {@link org.tserve.wlm.multinode.MemberJobs}, the parts of its
 * leaders' jobs that run here (each a worker in member mode), offered to the member's {@code /cluster} API as the
 * facade's {@code ClusterMember}. The leader's side, a worker's {@code NodeRole}, is in {@code supervision}.
 */
package org.tserve.wlm.multinode;

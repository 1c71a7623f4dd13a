package org.tserve.http;

import static io.netty.handler.codec.http.HttpMethod.DELETE;
import static io.netty.handler.codec.http.HttpMethod.GET;
import static io.netty.handler.codec.http.HttpMethod.POST;
import static org.tserve.http.Route.management;

import java.util.List;

/**
 * A cluster member's routes for its leader (docs/distributed.md, "Across machines"), answered
 * by {@link ManagementApi}: only on a member, with the management key or the cluster_key.
 */
final class ClusterRoutes {
    private ClusterRoutes() {
    }

    private static final String JOB = "{\"type\": \"object\"}";

    static List<Route> routes() {
        return List.of(
            management(GET, "/cluster/workers", "clusterJobs", "This member's jobs.")
                    .handler(c -> c.apis.management().clusterJobs(c))
                    .doc(op -> op.jsonInline(200, "The jobs", JOB).errors(401, 429)),
            management(POST, "/cluster/workers", "clusterStartJob", "Start this node's part of a job (the leader's call).")
                    .handler(c -> c.apis.management().clusterStart(c))
                    .doc(op -> op.body(true, "The job: job, url, nodeRank and the model's settings.", "application/json",
                            JOB).jsonInline(200, "Started", JOB).errors(400, 401, 404, 409, 429, 500, 503, 507)),
            management(GET, "/cluster/workers/{job_id}", "clusterJob", "One job's state.")
                    .handler(c -> c.apis.management().clusterJob(c))
                    .doc(op -> op.jsonInline(200, "The job", JOB).errors(401, 404, 429)),
            management(DELETE, "/cluster/workers/{job_id}", "clusterStopJob", "Stop one job.")
                    .handler(c -> c.apis.management().clusterStop(c))
                    .doc(op -> op.jsonInline(200, "Stopped", JOB).errors(401, 404, 429)))
            .stream().map(r -> r.auth(Route.Auth.CLUSTER).memberOnly()).toList();
    }
}

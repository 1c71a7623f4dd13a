package org.tserve.http;

import static io.netty.handler.codec.http.HttpMethod.DELETE;
import static io.netty.handler.codec.http.HttpMethod.GET;
import static io.netty.handler.codec.http.HttpMethod.POST;
import static org.tserve.http.OpenApiBuilder.STATUS;
import static org.tserve.http.Route.management;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The {@code /workflows} routes of {@link RouteTable} on the management connector ({@link WorkflowApi}). */
final class WorkflowRoutes {
    private WorkflowRoutes() {
    }

    private static final String NAME = "workflow_name";
    private static final String INT = "{\"type\": \"integer\", \"format\": \"int32\"}";

    static Map<String, String> schemas() {
        Map<String, String> s = new LinkedHashMap<>();
        s.put("WorkflowList", "{\"type\": \"object\", \"required\": [\"workflows\"], \"properties\": {\"nextPageToken\": {"
                + "\"type\": \"string\"}, \"workflows\": {\"type\": \"array\", \"items\": {\"type\": \"object\", \"required\": "
                + "[\"workflowName\", \"workflowUrl\"], \"properties\": {\"workflowName\": {\"type\": \"string\"}, "
                + "\"workflowUrl\": {\"type\": \"string\"}}}}}}");
        s.put("DescribeWorkflow", "{\"type\": \"array\", \"items\": {\"type\": \"object\", \"required\": [\"workflowName\","
                + " \"workflowUrl\", \"workflowDag\", \"models\"], \"properties\": {\"workflowName\": {\"type\": \"string\"}, "
                + "\"workflowUrl\": {\"type\": \"string\"}, \"minWorkers\": {\"type\": \"integer\"}, \"maxWorkers\": {\"type\": "
                + "\"integer\"}, \"batchSize\": {\"type\": \"integer\"}, \"maxBatchDelay\": {\"type\": \"integer\"}, "
                + "\"workflowDag\": {\"type\": \"object\"}, \"models\": {\"type\": \"object\"}}}}");
        return s;
    }

    static List<Route> routes() {
        return List.of(
            management(GET, "/workflows", "listWorkflows", "List registered workflows.")
                    .handler(c -> c.apis.workflows().list(c))
                    .doc(op -> op.querySchema("limit", INT, "Page size (default 100; above 100 or below 0: 100).")
                    .querySchema("next_page_token", INT, "Where the page starts (the nextPageToken of the previous page).")
                    .json(200, "A page of workflows", "WorkflowList").errors(400, 401, 429)),
            management(POST, "/workflows", "registerWorkflow", "Register a workflow archive (.war) from the workflow "
                    + "store and the models of its nodes (needs enable_model_api=true).")
                    .handler(c -> c.apis.workflows().register(c))
                    .doc(op -> op.requiredQuery("url", "string",
                            "The .war file in the workflow store (or a URL allowed_urls permits).")
                    .query(NAME, "string", "Name of the workflow (default: the archive's).")
                    .querySchema("response_timeout", INT, "Seconds a node's worker may take per batch.")
                    .querySchema("startup_timeout", INT, "Seconds a node's worker may take to load.")
                    .json(200, "Workflow registered", STATUS).errors(400, 401, 404, 405, 409, 429, 500, 503, 507)),
            management(GET, "/workflows/{workflow_name}", "describeWorkflow", "Describe a workflow: its settings, DAG "
                    + "and the model of each node.").handler(c -> c.apis.workflows().describe(c))
                    .doc(op -> op.json(200, "The workflow", "DescribeWorkflow").errors(401, 404, 429)),
            management(DELETE, "/workflows/{workflow_name}", "unregisterWorkflow", "Unregister a workflow and its nodes' "
                    + "models (needs enable_model_api=true).").handler(c -> c.apis.workflows().unregister(c))
                    .doc(op -> op.json(200, "Workflow unregistered", STATUS).errors(401, 404, 405, 429, 500)))
            .stream().map(Route::readsParams).toList();
    }
}

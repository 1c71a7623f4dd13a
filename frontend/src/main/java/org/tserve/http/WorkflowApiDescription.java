package org.tserve.http;

import static org.tserve.http.OpenApiBuilder.STATUS;

/** The workflow routes ({@link WorkflowApi}) in the OpenAPI descriptions of both connectors. */
final class WorkflowApiDescription {
    private WorkflowApiDescription() {
    }

    private static final String NAME = "workflow_name";
    private static final String NAME_DOC = "Name of the workflow.";
    private static final String INT = "{\"type\": \"integer\", \"format\": \"int32\"}";

    /** {@code POST /wfpredict/{w}} on the inference connector. */
    static void addInference(OpenApiBuilder d) {
        d.op("post", "/wfpredict/{workflow_name}", "workflowPredict", "Run a workflow's DAG: the request's inputs go to "
                + "its start nodes; one leaf's answer, or a JSON object of every leaf's keyed by node.")
                .path(NAME, NAME_DOC)
                .body(false, "The first nodes' input: any body, or multipart/form fields as inputs of their names.",
                        "application/json", "{}", "application/octet-stream", "{\"type\": \"string\", \"format\": \"binary\"}",
                        "text/plain", "{\"type\": \"string\"}")
                .handlerAnswer(200, "The leaf node's answer, or a JSON object of the leaves' answers")
                .errors(400, 401, 404, 413, 429, 500, 503, 504, 507);
        d.op("options", "/wfpredict/{workflow_name}", "workflowApiDescription", "This API's OpenAPI description.")
                .path(NAME, NAME_DOC).jsonInline(200, "The OpenAPI description", "{\"type\": \"object\"}")
                .errors(401, 429);
    }

    /** The {@code /workflows} routes on the management connector. */
    static void addManagement(OpenApiBuilder d) {
        d.schema("WorkflowList", "{\"type\": \"object\", \"required\": [\"workflows\"], \"properties\": {\"nextPageToken\": {"
                + "\"type\": \"string\"}, \"workflows\": {\"type\": \"array\", \"items\": {\"type\": \"object\", \"required\": "
                + "[\"workflowName\", \"workflowUrl\"], \"properties\": {\"workflowName\": {\"type\": \"string\"}, "
                + "\"workflowUrl\": {\"type\": \"string\"}}}}}}");
        d.schema("DescribeWorkflow", "{\"type\": \"array\", \"items\": {\"type\": \"object\", \"required\": [\"workflowName\","
                + " \"workflowUrl\", \"workflowDag\", \"models\"], \"properties\": {\"workflowName\": {\"type\": \"string\"}, "
                + "\"workflowUrl\": {\"type\": \"string\"}, \"minWorkers\": {\"type\": \"integer\"}, \"maxWorkers\": {\"type\": "
                + "\"integer\"}, \"batchSize\": {\"type\": \"integer\"}, \"maxBatchDelay\": {\"type\": \"integer\"}, "
                + "\"workflowDag\": {\"type\": \"object\"}, \"models\": {\"type\": \"object\"}}}}");
        d.op("get", "/workflows", "listWorkflows", "List registered workflows.")
                .querySchema("limit", INT, "Page size (default 100; above 100 or below 0: 100).")
                .querySchema("next_page_token", INT, "Where the page starts (the nextPageToken of the previous page).")
                .json(200, "A page of workflows", "WorkflowList").errors(400, 401, 429);
        d.op("post", "/workflows", "registerWorkflow", "Register a workflow archive (.war) from the workflow store and "
                + "the models of its nodes (needs enable_model_api=true).")
                .requiredQuery("url", "string", "The .war file in the workflow store (or a URL allowed_urls permits).")
                .query(NAME, "string", "Name of the workflow (default: the archive's).")
                .querySchema("response_timeout", INT, "Seconds a node's worker may take per batch.")
                .querySchema("startup_timeout", INT, "Seconds a node's worker may take to load.")
                .json(200, "Workflow registered", STATUS).errors(400, 401, 404, 405, 409, 429, 500, 503, 507);
        d.op("get", "/workflows/{workflow_name}", "describeWorkflow", "Describe a workflow: its settings, DAG and the "
                + "model of each node.").path(NAME, NAME_DOC).json(200, "The workflow", "DescribeWorkflow")
                .errors(401, 404, 429);
        d.op("delete", "/workflows/{workflow_name}", "unregisterWorkflow", "Unregister a workflow and its nodes' models "
                + "(needs enable_model_api=true).").path(NAME, NAME_DOC).json(200, "Workflow unregistered", STATUS)
                .errors(401, 404, 405, 429, 500);
    }
}

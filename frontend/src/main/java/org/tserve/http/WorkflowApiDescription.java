package org.tserve.http;

/** {@code /wfpredict} ({@link WorkflowApi}) in the inference OpenAPI description; the rest is in {@link WorkflowRoutes}. */
final class WorkflowApiDescription {
    private WorkflowApiDescription() {
    }

    private static final String NAME = "workflow_name";
    private static final String NAME_DOC = "Name of the workflow.";

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
}

package org.tserve.http;

import static org.tserve.http.InferenceApiDescription.MODEL;
import static org.tserve.http.InferenceApiDescription.VERSION;
import static org.tserve.http.OpenApiBuilder.STATUS;

/** The management connector's routes in the OpenAPI description ({@link ManagementApi}). */
final class ManagementApiDescription {
    private ManagementApiDescription() {
    }

    private static final String INT = "{\"type\": \"integer\", \"format\": \"int32\", \"minimum\": 0}";
    private static final String BOOL = "boolean";

    /** The register parameters: name, JSON schema, description (query string or JSON body, same keys). */
    private static final String[][] REGISTER = {
        {"url", "{\"type\": \"string\", \"minLength\": 1}", "Archive name in the model store, a path in it, or a URL "
            + "allowed by allowed_urls (required here or in the JSON body)."},
        {MODEL, "{\"type\": \"string\", \"pattern\": \"^[A-Za-z0-9][A-Za-z0-9_.-]*$\"}",
            "Name of the model (default: the archive's)."},
        {"handler", "{\"type\": \"string\"}", "Handler (default: the archive's)."},
        {"runtime", "{\"type\": \"string\", \"enum\": [\"python\", \"python3\", \"LSP\"]}", "Runtime of the workers."},
        {"batch_size", "{\"type\": \"integer\", \"format\": \"int32\", \"minimum\": 1}", "Inference batch size."},
        {"max_batch_delay", INT, "Maximum batching delay in ms."},
        {"initial_workers", INT, "Number of initial workers (capped by max_workers_per_model and max_workers)."},
        {"synchronous", "{\"type\": \"boolean\"}", "Wait for the workers to load (default true)."},
        {"response_timeout", INT, "Seconds a worker may take per batch."},
        {"startup_timeout", INT, "Seconds a worker may take to load."},
        {"preprocess_workers", INT, "CPU preprocess workers per worker (tserve)."},
        {"postprocess_in_pool", "{\"type\": \"boolean\"}", "Run postprocess in the preprocess pool too (tserve)."},
        {"dispatch_policy", "{\"type\": \"string\", \"enum\": [\"eager\", \"adaptive\", \"delay\"]}",
            "How batches are formed (tserve)."},
    };

    static void add(OpenApiBuilder d, boolean clusterMember) {
        d.schema("ModelList", "{\"type\": \"object\", \"required\": [\"models\"], \"properties\": {\"nextPageToken\": {"
                + "\"type\": \"string\"}, \"models\": {\"type\": \"array\", \"items\": {\"type\": \"object\", \"required\": "
                + "[\"modelName\", \"modelUrl\"], \"properties\": {\"modelName\": {\"type\": \"string\"}, \"modelUrl\": {"
                + "\"type\": \"string\"}}}}}}");
        d.schema("DescribeModel", "{\"type\": \"array\", \"items\": {\"type\": \"object\", \"required\": [\"modelName\", "
                + "\"modelVersion\", \"minWorkers\", \"maxWorkers\", \"batchSize\", \"workers\", \"jobQueueStatus\"], "
                + "\"properties\": {\"modelName\": {\"type\": \"string\"}, \"modelVersion\": {\"type\": \"string\"}, "
                + "\"modelUrl\": {\"type\": \"string\"}, \"minWorkers\": {\"type\": \"integer\"}, \"maxWorkers\": {\"type\": "
                + "\"integer\"}, \"batchSize\": {\"type\": \"integer\"}, \"maxBatchDelay\": {\"type\": \"integer\"}, "
                + "\"workers\": {\"type\": \"array\", \"items\": {\"type\": \"object\", \"required\": [\"id\", \"status\"], "
                + "\"properties\": {\"id\": {\"type\": \"string\"}, \"status\": {\"type\": \"string\"}, \"pid\": {\"type\": "
                + "\"integer\"}}}}, \"jobQueueStatus\": {\"type\": \"object\"}, \"customizedMetadata\": {}}}}");
        d.op("get", "/models", "listModels", "List registered models (default versions, sorted by name).")
                .querySchema("limit", "{\"type\": \"integer\", \"format\": \"int32\"}",
                        "Page size (default 100; above 100 or below 0: 100).")
                .querySchema("next_page_token", "{\"type\": \"integer\", \"format\": \"int32\"}",
                        "Where the page starts (the nextPageToken of the previous page).")
                .json(200, "A page of models", "ModelList").errors(400, 401, 429);
        OpenApiBuilder.Op register = d.op("post", "/models", "registerModel", "Register a model version (needs "
                + "enable_model_api=true). Parameters come in the query string or as a JSON object body.");
        StringBuilder body = new StringBuilder("{\"type\": \"object\", \"properties\": {");
        for (int i = 0; i < REGISTER.length; i++) {
            register.querySchema(REGISTER[i][0], REGISTER[i][1], REGISTER[i][2]);
            body.append(i > 0 ? ", " : "").append('"').append(REGISTER[i][0]).append("\": ").append(REGISTER[i][1]);
        }
        register.body(false, "The parameters as a JSON object (instead of the query string).", "application/json",
                body.append("}}").toString())
                .json(200, "Registered (with its workers loaded when synchronous)", STATUS)
                .json(202, OpenApiBuilder.meaning(202), STATUS)
                .errors(400, 401, 404, 405, 409, 413, 429, 500, 503, 507);
        for (boolean versioned : new boolean[] {false, true}) {
            String path = versioned ? "/models/{model_name}/{model_version}" : "/models/{model_name}";
            String v = versioned ? "Version" : "";
            String which = versioned ? " of a version ('all': every version)" : " of the default version";
            model(d.op("get", path, "describeModel" + v, "Describe the model" + which + "; customized=true asks the "
                    + "handler for its metadata."), versioned)
                    .query("customized", BOOL, "Include the handler's metadata (customizedMetadata).")
                    .json(200, "The description (an array: one element per version)", "DescribeModel")
                    .errors(400, 401, 404, 429, 500, 503, 504);
            OpenApiBuilder.Op scale = model(d.op("put", path, "setAutoScale" + v, "Scale the workers" + which
                    + " (capped by max_workers_per_model and max_workers)."), versioned)
                    .querySchema("min_worker", INT, "Minimum workers (default 1).")
                    .querySchema("max_worker", INT, "Maximum workers (default min_worker; not below min_worker).")
                    .query("synchronous", BOOL, "Wait for the workers (default false).")
                    .querySchema("timeout", "{\"type\": \"integer\", \"format\": \"int32\"}",
                            "Accepted for compatibility (workers always finish their batches).");
            if (!versioned) {
                scale.query(VERSION, "string", "The version to scale (default: the default version).");
            }
            scale.json(200, "Scaled (synchronous)", STATUS).json(202, OpenApiBuilder.meaning(202), STATUS)
                    .errors(400, 401, 404, 429, 500, 503, 507);
            model(d.op("delete", path, "unregisterModel" + v, "Unregister the model" + which + " (needs "
                    + "enable_model_api=true)."), versioned)
                    .json(200, "Unregistered", STATUS).errors(401, 403, 404, 405, 429);
            model(d.op("options", path, "modelManagementApiDescription" + v, "This API's OpenAPI description."), versioned)
                    .jsonInline(200, "The OpenAPI description", "{\"type\": \"object\"}").errors(401, 429);
        }
        model(d.op("put", "/models/{model_name}/{model_version}/set-default", "setDefault", "Make a version the "
                + "default."), true).json(200, "Default version updated", STATUS).errors(401, 404, 429);
        String ready = "{\"type\": \"object\", \"required\": [\"name\", \"ready\"], \"properties\": {\"name\": {"
                + "\"type\": \"string\"}, \"ready\": {\"type\": \"boolean\"}}}";
        d.op("get", "/v1/models/{model_name}", "kserveModelReady", "KServe v1 model readiness: 503 while no worker "
                + "of the default version is READY (a ':suffix' on the name is ignored).").path(MODEL, "Name of the model.")
                .jsonInline(200, "Ready", ready).jsonInline(503, "Not ready", ready).errors(401, 404, 429);
        d.op("post", "/token", "rotateToken", "Regenerate the management or inference key (token authorization on; "
                + "needs the API key). With token authorization off: 400.")
                .querySchema("type", "{\"type\": \"string\", \"enum\": [\"management\", \"inference\"]}",
                        "Which key to regenerate.")
                .jsonInline(200, "Regenerated (the body is an empty JSON string)", "{\"type\": \"string\"}")
                .errors(400, 401, 429, 500);
        if (clusterMember) {
            cluster(d);
        }
    }

    private static OpenApiBuilder.Op model(OpenApiBuilder.Op op, boolean versioned) {
        op.path(MODEL, "Name of the model.");
        return versioned ? op.path(VERSION, "Version of the model.") : op;
    }

    /** A cluster member's routes for its leader (docs/distributed.md, "Across machines"). */
    private static void cluster(OpenApiBuilder d) {
        String job = "{\"type\": \"object\"}";
        d.op("get", "/cluster/workers", "clusterJobs", "This member's jobs.").jsonInline(200, "The jobs", job)
                .errors(401, 429);
        d.op("post", "/cluster/workers", "clusterStartJob", "Start this node's part of a job (the leader's call).")
                .body(true, "The job: job, url, nodeRank and the model's settings.", "application/json", job)
                .jsonInline(200, "Started", job).errors(400, 401, 404, 409, 429, 500, 503, 507);
        d.op("get", "/cluster/workers/{job_id}", "clusterJob", "One job's state.").path("job_id", "The job's id.")
                .jsonInline(200, "The job", job).errors(401, 404, 429);
        d.op("delete", "/cluster/workers/{job_id}", "clusterStopJob", "Stop one job.").path("job_id", "The job's id.")
                .jsonInline(200, "Stopped", job).errors(401, 404, 429);
    }
}

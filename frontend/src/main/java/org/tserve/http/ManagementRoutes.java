package org.tserve.http;

import static io.netty.handler.codec.http.HttpMethod.DELETE;
import static io.netty.handler.codec.http.HttpMethod.GET;
import static io.netty.handler.codec.http.HttpMethod.OPTIONS;
import static io.netty.handler.codec.http.HttpMethod.POST;
import static io.netty.handler.codec.http.HttpMethod.PUT;
import static org.tserve.http.OpenApiBuilder.STATUS;
import static org.tserve.http.Route.MODEL;
import static org.tserve.http.Route.VERSION;
import static org.tserve.http.Route.management;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.tserve.config.ModelKey;
import org.tserve.config.ModelKeys;

/** The model management routes of {@link RouteTable}, answered by {@link ManagementApi}. */
final class ManagementRoutes {
    private ManagementRoutes() {
    }

    private static final String INT = "{\"type\": \"integer\", \"format\": \"int32\", \"minimum\": 0}";
    private static final String BOOL = "boolean";

    /**
     * The register parameters that are not model settings: name, JSON schema, description (query string or
     * JSON body, same keys). The model settings' parameters follow from {@code ModelKeys.apiKeys()}.
     */
    private static final String[][] REGISTER = {
        {"url", "{\"type\": \"string\", \"minLength\": 1}", "Archive name in the model store, a path in it, or a URL "
            + "allowed by allowed_urls (required here or in the JSON body)."},
        {MODEL, "{\"type\": \"string\", \"pattern\": \"^[A-Za-z0-9][A-Za-z0-9_.-]*$\"}",
            "Name of the model (default: the archive's)."},
        {"handler", "{\"type\": \"string\"}", "Handler (default: the archive's)."},
        {"runtime", "{\"type\": \"string\", \"enum\": [\"python\", \"python3\", \"LSP\"]}", "Runtime of the workers."},
        {"synchronous", "{\"type\": \"boolean\"}", "Wait for the workers to load (default true)."},
    };

    /** The answers' named schemas, in the document's order. */
    static Map<String, String> schemas() {
        Map<String, String> s = new LinkedHashMap<>();
        s.put("ModelList", "{\"type\": \"object\", \"required\": [\"models\"], \"properties\": {\"nextPageToken\": {"
                + "\"type\": \"string\"}, \"models\": {\"type\": \"array\", \"items\": {\"type\": \"object\", \"required\": "
                + "[\"modelName\", \"modelUrl\"], \"properties\": {\"modelName\": {\"type\": \"string\"}, \"modelUrl\": {"
                + "\"type\": \"string\"}}}}}}");
        s.put("DescribeModel", "{\"type\": \"array\", \"items\": {\"type\": \"object\", \"required\": [\"modelName\", "
                + "\"modelVersion\", \"minWorkers\", \"maxWorkers\", \"batchSize\", \"workers\", \"jobQueueStatus\"], "
                + "\"properties\": {\"modelName\": {\"type\": \"string\"}, \"modelVersion\": {\"type\": \"string\"}, "
                + "\"modelUrl\": {\"type\": \"string\"}, \"minWorkers\": {\"type\": \"integer\"}, \"maxWorkers\": {\"type\": "
                + "\"integer\"}, \"batchSize\": {\"type\": \"integer\"}, \"maxBatchDelay\": {\"type\": \"integer\"}, "
                + "\"workers\": {\"type\": \"array\", \"items\": {\"type\": \"object\", \"required\": [\"id\", \"status\"], "
                + "\"properties\": {\"id\": {\"type\": \"string\"}, \"status\": {\"type\": \"string\"}, \"pid\": {\"type\": "
                + "\"integer\"}}}}, \"jobQueueStatus\": {\"type\": \"object\"}, \"customizedMetadata\": {}}}}");
        s.putAll(WorkflowRoutes.schemas());
        return s;
    }

    static List<Route> routes() {
        List<Route> r = new ArrayList<>();
        r.add(management(GET, "/models", "listModels", "List registered models (default versions, sorted by name).")
                .readsParams().handler(c -> c.apis.management().list(c))
                .doc(op -> op.querySchema("limit", "{\"type\": \"integer\", \"format\": \"int32\"}",
                        "Page size (default 100; above 100 or below 0: 100).")
                .querySchema("next_page_token", "{\"type\": \"integer\", \"format\": \"int32\"}",
                        "Where the page starts (the nextPageToken of the previous page).")
                .json(200, "A page of models", "ModelList").errors(400, 401, 429)));
        r.add(management(POST, "/models", "registerModel", "Register a model version (needs enable_model_api=true). "
                + "Parameters come in the query string or as a JSON object body.")
                .readsParams().handler(c -> c.apis.management().register(c)).doc(ManagementRoutes::register));
        for (boolean versioned : new boolean[] {false, true}) {
            r.addAll(model(versioned));
        }
        r.add(management(PUT, "/models/{model_name}/{model_version}/set-default", "setDefault",
                "Make a version the default.").readsParams().handler(c -> c.apis.management().setDefault(c))
                .doc(op -> op.json(200, "Default version updated", STATUS).errors(401, 404, 429)));
        String ready = "{\"type\": \"object\", \"required\": [\"name\", \"ready\"], \"properties\": {\"name\": {"
                + "\"type\": \"string\"}, \"ready\": {\"type\": \"boolean\"}}}";
        r.add(management(GET, "/v1/models/{model_name}", "kserveModelReady", "KServe v1 model readiness: 503 while no "
                + "worker of the default version is READY (a ':suffix' on the name is ignored).")
                .auth(Route.Auth.PROBE).handler(c -> c.apis.management().v1Ready(c))
                .doc(op -> op.jsonInline(200, "Ready", ready).jsonInline(503, "Not ready", ready).errors(401, 404, 429)));
        r.add(management(POST, "/token", "rotateToken", "Regenerate the management or inference key (token "
                + "authorization on; needs the API key). With token authorization off: 400.")
                .auth(Route.Auth.API).anyMethod().handler(c -> c.apis.management().rotate(c))
                .doc(op -> op.querySchema("type", "{\"type\": \"string\", \"enum\": [\"management\", \"inference\"]}",
                        "Which key to regenerate.")
                .jsonInline(200, "Regenerated (the body is an empty JSON string)", "{\"type\": \"string\"}")
                .errors(400, 401, 429, 500)));
        r.addAll(ClusterRoutes.routes());
        r.addAll(WorkflowRoutes.routes());
        return r;
    }

    /** GET, PUT, DELETE and OPTIONS of /models/{model_name}[/{model_version}]. */
    private static List<Route> model(boolean versioned) {
        String path = versioned ? "/models/{model_name}/{model_version}" : "/models/{model_name}";
        String v = versioned ? "Version" : "";
        String which = versioned ? " of a version ('all': every version)" : " of the default version";
        return List.of(
            management(GET, path, "describeModel" + v, "Describe the model" + which + "; customized=true asks the "
                    + "handler for its metadata.").readsParams().handler(c -> c.apis.management().describe(c))
                    .doc(op -> op.query("customized", BOOL, "Include the handler's metadata (customizedMetadata).")
                    .json(200, "The description (an array: one element per version)", "DescribeModel")
                    .errors(400, 401, 404, 429, 500, 503, 504)),
            management(PUT, path, "setAutoScale" + v, "Scale the workers" + which
                    + " (capped by max_workers_per_model and max_workers).").readsParams()
                    .handler(c -> c.apis.management().scale(c)).doc(op -> scale(op, versioned)),
            management(DELETE, path, "unregisterModel" + v, "Unregister the model" + which + " (needs "
                    + "enable_model_api=true).").readsParams().handler(c -> c.apis.management().unregister(c))
                    .doc(op -> op.json(200, "Unregistered", STATUS).errors(401, 403, 404, 405, 429)),
            management(OPTIONS, path, "modelManagementApiDescription" + v, "This API's OpenAPI description.")
                    .readsParams().handler(c -> c.apis.management().options(c))
                    .doc(op -> op.jsonInline(200, "The OpenAPI description", "{\"type\": \"object\"}").errors(401, 429)));
    }

    private static void register(OpenApiBuilder.Op op) {
        List<String[]> params = new ArrayList<>(List.of(REGISTER));
        for (ModelKey<?> k : ModelKeys.apiKeys()) {
            params.add(new String[] {k.apiParam(), k.apiSchema(), k.doc + " (model-config.yaml: " + k.name + ")."});
        }
        StringBuilder body = new StringBuilder("{\"type\": \"object\", \"properties\": {");
        for (int i = 0; i < params.size(); i++) {
            String[] p = params.get(i);
            op.querySchema(p[0], p[1], p[2]);
            body.append(i > 0 ? ", " : "").append('"').append(p[0]).append("\": ").append(p[1]);
        }
        op.body(false, "The parameters as a JSON object (instead of the query string).", "application/json",
                body.append("}}").toString())
                .json(200, "Registered (with its workers loaded when synchronous)", STATUS)
                .json(202, OpenApiBuilder.meaning(202), STATUS)
                .errors(400, 401, 404, 405, 409, 413, 429, 500, 503, 507);
    }

    private static void scale(OpenApiBuilder.Op op, boolean versioned) {
        op.querySchema("min_worker", INT, "Minimum workers (default 1).")
                .querySchema("max_worker", INT, "Maximum workers (default min_worker; not below min_worker).")
                .query("synchronous", BOOL, "Wait for the workers (default false).")
                .querySchema("timeout", "{\"type\": \"integer\", \"format\": \"int32\"}",
                        "Accepted for compatibility (workers always finish their batches).");
        if (!versioned) {
            op.query(VERSION, "string", "The version to scale (default: the default version).");
        }
        op.json(200, "Scaled (synchronous)", STATUS).json(202, OpenApiBuilder.meaning(202), STATUS)
                .errors(400, 401, 404, 429, 500, 503, 507);
    }
}

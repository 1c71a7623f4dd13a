package org.tserve.http;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import io.netty.channel.ChannelFutureListener;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpMethod;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.atomic.AtomicReference;
import org.tserve.config.ConfigManager;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.api.Header;
import org.tserve.wlm.api.JobResponder;
import org.tserve.wlm.api.Response;
import org.tserve.wlm.api.StatusResult;
import org.tserve.workflow.Workflow;
import org.tserve.workflow.WorkflowExecutor;
import org.tserve.workflow.WorkflowRegistry;
import org.tserve.workflow.WorkflowSpec;

/**
 * TorchServe's workflow routes: {@code GET|POST /workflows} and {@code GET|DELETE
 * /workflows/{name}} on the management connector, {@code POST /wfpredict/{name}} on the
 * inference connector. Registering and unregistering need the model API, as for models.
 */
final class WorkflowApi {
    private final WorkflowRegistry workflows;
    private final ModelManager models;
    private final ConfigManager cfg;
    private final ExecutorService blocking;
    private final ApiDescription description;

    WorkflowApi(WorkflowRegistry workflows, ModelManager models, ConfigManager cfg, ExecutorService blocking,
                ApiDescription description) {
        this.description = description;
        this.workflows = workflows;
        this.models = models;
        this.cfg = cfg;
        this.blocking = blocking;
    }

    /** {@code /wfpredict/{workflow_name}} (any method; OPTIONS answers the inference API's description). */
    void predict(RouteCall c) throws HttpError {
        Exchange ex = c.ex;
        FullHttpRequest req = c.req;
        if (req.method().equals(HttpMethod.OPTIONS)) {
            ex.sendJson(200, description.inference());
            return;
        }
        Workflow wf = ManagementApi.call(() -> workflows.get(c.path("workflow_name")));
        List<Header> headers = InputParser.headers(req, 2);
        // A client that goes away cancels the run; the listener goes once the run is answered
        // (a keep-alive connection must not collect one per request).
        AtomicReference<WorkflowExecutor> run = new AtomicReference<>();
        ChannelFutureListener cancelOnClose = f -> {
            WorkflowExecutor r = run.get();
            if (r != null) {
                r.cancel();
            }
        };
        ex.ctx.channel().closeFuture().addListener(cancelOnClose);
        JobResponder client = new AnsweredHook(new HttpJobResponder(ex),
                () -> ex.ctx.channel().closeFuture().removeListener(cancelOnClose));
        run.set(WorkflowExecutor.run(wf, models::submit, ex.requestId, headers,
                ex.parts(req), client));
    }

    /** The {@code /workflows} route handlers ({@link WorkflowRoutes}). */
    void list(RouteCall c) throws HttpError {
        c.ex.sendJson(200, list(c.params()));
    }

    void register(RouteCall c) throws HttpError {
        Params p = c.params();
        requireModelApi("registering");
        String url = p.str("url");
        if (url == null) {
            throw new HttpError(400, "Parameter url is required (the .war file in the workflow store).");
        }
        String name = p.str("workflow_name");
        Integer responseTimeout = p.integer("response_timeout");
        Integer startupTimeout = p.integer("startup_timeout");
        async(c.ex, () -> workflows.register(url, name, responseTimeout, startupTimeout));
    }

    void describe(RouteCall c) throws HttpError {
        JsonArray a = new JsonArray();
        a.add(describe(ManagementApi.call(() -> workflows.get(c.path("workflow_name")))));
        c.ex.sendJson(200, a);
    }

    void unregister(RouteCall c) throws HttpError {
        requireModelApi("unregistering");
        String name = c.path("workflow_name");
        async(c.ex, () -> workflows.unregister(name));
    }

    private JsonObject list(Params p) throws HttpError {
        Integer limitParam = p.integer("limit");
        Integer tokenParam = p.integer("next_page_token");
        int limit = limitParam == null || limitParam < 0 || limitParam > 100 ? 100 : limitParam;
        int start = tokenParam == null || tokenParam < 0 ? 0 : tokenParam;
        List<Workflow> all = workflows.list();
        JsonArray items = new JsonArray();
        int end = Math.min(all.size(), start + limit);
        for (int i = start; i < end; i++) {
            JsonObject o = new JsonObject();
            o.addProperty("workflowName", all.get(i).name());
            o.addProperty("workflowUrl", all.get(i).archive().getUrl());
            items.add(o);
        }
        JsonObject out = new JsonObject();
        if (end < all.size()) {
            out.addProperty("nextPageToken", String.valueOf(end));
        }
        out.add("workflows", items);
        return out;
    }

    /** TorchServe's describe fields (global settings, the dag), plus the model of each node. */
    private static JsonObject describe(Workflow wf) {
        WorkflowSpec spec = wf.spec();
        JsonObject o = new JsonObject();
        o.addProperty("workflowName", wf.name());
        o.addProperty("workflowUrl", wf.archive().getUrl());
        o.addProperty("minWorkers", spec.global("min-workers"));
        o.addProperty("maxWorkers", spec.global("max-workers"));
        o.addProperty("batchSize", spec.global("batch-size"));
        o.addProperty("maxBatchDelay", spec.global("max-batch-delay"));
        JsonObject dag = new JsonObject();
        spec.dag().forEach((node, next) -> {
            JsonArray a = new JsonArray();
            next.forEach(a::add);
            dag.add(node, a);
        });
        o.add("workflowDag", dag);
        JsonObject nodes = new JsonObject();
        spec.nodes().forEach((node, n) -> nodes.addProperty(node, wf.modelName(node)));
        o.add("models", nodes);
        return o;
    }

    private void requireModelApi(String what) throws HttpError {
        if (!cfg.isModelApiEnabled()) {
            throw new HttpError(405, "MethodNotAllowedException", "Model API is disabled: " + what + " workflows needs "
                    + "enable_model_api=true in config.properties (or --enable-model-api)");
        }
    }

    private void async(Exchange ex, ManagementApi.Call<StatusResult> a) {
        ManagementApi.async(blocking, ex, () -> {
            StatusResult r = a.run();
            ex.sendStatus(r.status(), r.message());
        });
    }

    /** Forwards a run's answer to the client, running {@code onAnswered} first. */
    private static final class AnsweredHook implements JobResponder {
        private final JobResponder client;
        private final Runnable onAnswered;

        AnsweredHook(JobResponder client, Runnable onAnswered) {
            this.client = client;
            this.onAnswered = onAnswered;
        }

        @Override
        public void onChunk(Response chunk) {
            client.onChunk(chunk);
        }

        @Override
        public void onResult(Response result) {
            onAnswered.run();
            client.onResult(result);
        }

        @Override
        public void onError(int status, String message) {
            onAnswered.run();
            client.onError(status, message);
        }
    }
}

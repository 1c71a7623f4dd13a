package org.tserve.http;

import static org.tserve.http.Route.MODEL;
import static org.tserve.http.Route.VERSION;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import io.netty.handler.codec.http.QueryStringDecoder;
import java.io.IOException;
import java.util.List;
import java.util.concurrent.ExecutorService;
import org.apache.logging.log4j.Logger;
import org.tserve.api.DescribeJson;
import org.tserve.auth.TokenAuthorization;
import org.tserve.config.ConfigManager;
import org.tserve.config.ModelKey;
import org.tserve.config.ModelKeys;
import org.tserve.util.Logging;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.JobResponder;
import org.tserve.wlm.api.ModelDescription;
import org.tserve.wlm.api.RegisterRequest;
import org.tserve.wlm.api.Response;
import org.tserve.wlm.api.StatusResult;
import org.tserve.wlm.api.WlmException;

/**
 * The management API: register, scale, describe, list, unregister, set-default, token
 * rotation and KServe's model-ready. Calls that may block run on a separate executor, never on
 * the Netty event loop.
 */
final class ManagementApi {
    private static final Logger LOG = Logging.logger(ManagementApi.class);
    private final ModelManager models;
    private final ConfigManager cfg;
    private final TokenAuthorization tokens;
    private final ExecutorService blocking;
    private final ApiDescription description;

    ManagementApi(ModelManager models, ConfigManager cfg, TokenAuthorization tokens, ExecutorService blocking,
                  ApiDescription description) {
        this.description = description;
        this.models = models;
        this.cfg = cfg;
        this.tokens = tokens;
        this.blocking = blocking;
    }

    /** The route handlers ({@link ManagementRoutes}, {@link ClusterRoutes}). */
    void list(RouteCall c) throws HttpError {
        Params p = c.params();
        int limit = p.integer("limit") == null ? 100 : p.integer("limit");
        int token = p.integer("next_page_token") == null ? 0 : p.integer("next_page_token");
        c.ex.sendJson(200, DescribeJson.list(models.list(limit, token)));
    }

    void setDefault(RouteCall c) throws HttpError {
        StatusResult r = call(() -> models.setDefault(c.path(MODEL), c.path(VERSION)));
        c.ex.sendStatus(r.status(), r.message());
    }

    void describe(RouteCall c) throws HttpError {
        // on the blocking pool: describe waits up to 2 s for the workers' PONGs
        boolean customized = c.params().bool("customized", false);
        async(c.ex, () -> describe(c.ex, c.path(MODEL), c.path(VERSION), customized));
    }

    void scale(RouteCall c) throws HttpError {
        Params p = c.params();
        String version = c.path(VERSION);
        scale(c.ex, c.path(MODEL), version == null ? p.str("model_version") : version, p);
    }

    /**
     * TorchServe's 405 body, word for word (clients and its tests compare it); the fix, which that
     * body does not name, goes to the log.
     */
    private static HttpError modelApiDisabled(String what) {
        LOG.warn("Model API is disabled: {} models needs enable_model_api=true in config.properties "
                + "(or --enable-model-api); answered 405", what);
        return HttpError.methodNotAllowed();
    }

    void unregister(RouteCall c) throws HttpError {
        if (!cfg.isModelApiEnabled()) {
            throw modelApiDisabled("unregistering");
        }
        async(c.ex, () -> {
            StatusResult r = models.unregister(c.path(MODEL), c.path(VERSION));
            c.ex.sendStatus(r.status(), r.message());
        });
    }

    /** {@code OPTIONS /models/{m}}: the management document, also on the shared connector. */
    void options(RouteCall c) {
        c.ex.sendJson(200, description.management());
    }

    void v1Ready(RouteCall c) throws HttpError {
        ModelReadiness.answer(c.ex, models, ModelReadiness.v1Model(c.path(MODEL)), null);
    }

    void clusterJobs(RouteCall c) {
        c.ex.sendJson(200, models.memberJobs().list());
    }

    void clusterStart(RouteCall c) throws HttpError {
        JsonObject spec;
        try {
            spec = org.tserve.util.Json.parse(c.req.content().toString(java.nio.charset.StandardCharsets.UTF_8))
                    .getAsJsonObject();
        } catch (RuntimeException e) {
            throw new HttpError(400, "the body must be a JSON object: " + e.getMessage());
        }
        async(c.ex, () -> c.ex.sendJson(200, models.memberJobs().start(spec)));
    }

    void clusterJob(RouteCall c) throws HttpError {
        c.ex.sendJson(200, call(() -> models.memberJobs().state(c.path("job_id"))));
    }

    void clusterStop(RouteCall c) {
        String id = c.path("job_id");
        async(c.ex, () -> {
            JsonObject st = models.memberJobs().stop(id);
            if (st == null) {
                throw new WlmException(404, "no job " + id + " on this node");
            }
            c.ex.sendJson(200, st);
        });
    }

    void register(RouteCall c) throws HttpError {
        register(c.ex, c.params());
    }

    void rotate(RouteCall c) throws HttpError {
        rotate(c.ex, c.q);
    }

    private void register(Exchange ex, Params p) throws HttpError {
        if (!cfg.isModelApiEnabled()) {
            throw modelApiDisabled("registering");
        }
        String url = p.str("url");
        if (url == null) {
            throw new HttpError(400, "Parameter url is required.");
        }
        RegisterRequest r = new RegisterRequest(url);
        r.modelName = p.str("model_name");
        r.handler = p.str("handler");
        r.runtime = p.str("runtime");
        r.initialWorkers = p.integer("initial_workers");   // null: model-config.yaml, then default_workers_per_model
        for (ModelKey<?> k : ModelKeys.apiKeys()) {
            String param = k.apiParam();
            if (p.str(param) != null && !param.equals("initial_workers")) {
                Object v = k.apiInteger() ? p.integer(param) : k.apiBoolean() ? p.bool(param, false) : p.str(param);
                r.settings.put(k.name, v);
            }
        }
        r.synchronous = p.bool("synchronous", true);
        async(ex, () -> {
            StatusResult res = models.register(r);
            ex.sendStatus(res.status(), res.message());
        });
    }

    private void scale(Exchange ex, String name, String version, Params p) throws HttpError {
        Integer min = p.integer("min_worker");
        Integer max = p.integer("max_worker");
        int mn = min == null ? 1 : min;
        int mx = max == null ? mn : max;
        boolean sync = p.bool("synchronous", false);
        p.integer("timeout");   // validated; workers always finish in-flight batches before stopping
        async(ex, () -> {
            StatusResult r = models.scale(name, version, mn, mx, sync);
            ex.sendStatus(r.status(), r.message());
        });
    }

    private void describe(Exchange ex, String name, String version, boolean customized) throws WlmException {
        List<ModelDescription> ds = models.describe(name, version);
        if (!customized || "all".equals(version)) {
            JsonArray a = new JsonArray();
            for (ModelDescription d : ds) {
                a.add(DescribeJson.model(d, null));
            }
            ex.sendJson(200, a);
            return;
        }
        ModelDescription d = ds.get(0);
        Job job = Job.describe(name, d.modelVersion(), new JobResponder() {
            @Override
            public void onChunk(Response chunk) {
                // describe answers are never streamed
            }

            @Override
            public void onResult(Response r) {
                if (r.status() >= 400) {
                    ex.sendError(r.status(), "InternalServerException", r.message().isEmpty() ? "describe failed" : r.message());
                    return;
                }
                // not here: this runs on the thread that read the worker's answer, and describe
                // waits for a PONG that the same thread would have to read
                async(ex, () -> {
                    JsonArray a = new JsonArray();
                    a.add(DescribeJson.model(models.describe(name, d.modelVersion()).get(0), r.body()));
                    ex.sendJson(200, a);
                });
            }

            @Override
            public void onError(int status, String message) {
                ex.sendError(status, HttpError.typeFor(status), message);
            }
        });
        models.submit(job);
    }

    private void rotate(Exchange ex, QueryStringDecoder q) throws HttpError {
        List<String> type = q.parameters().get("type");
        String t = type == null || type.isEmpty() ? null : type.get(0);
        if (!tokens.isEnabled()) {
            throw new HttpError(400, "Token authorization is disabled (disable_token_authorization / -dt); nothing to rotate");
        }
        try {
            if (!tokens.rotate(t)) {
                throw new HttpError(400, "Token Authentication failed: type must be management or inference, got '" + t + "'");
            }
        } catch (IOException e) {
            throw new HttpError(500, "Cannot rewrite " + tokens.getFile() + ": " + e.getMessage());
        }
        ex.sendJson(200, "\"\"");
    }

    /** A management call that throws WlmException, mapped to HttpError. */
    interface Call<T> {
        T run() throws WlmException;
    }

    interface Action {
        void run() throws WlmException;
    }

    static <T> T call(Call<T> c) throws HttpError {
        try {
            return c.run();
        } catch (WlmException e) {
            throw new HttpError(e.getStatus(), e.getMessage());
        }
    }

    private void async(Exchange ex, Action a) {
        async(blocking, ex, a);
    }

    /** Runs a call that may block (registration waits for workers) on {@code blocking}, answering its errors. */
    static void async(ExecutorService blocking, Exchange ex, Action a) {
        blocking.execute(() -> {
            try {
                a.run();
            } catch (WlmException e) {
                ex.sendError(e.getStatus(), HttpError.typeFor(e.getStatus()), e.getMessage());
            } catch (RuntimeException e) {
                LOG.error("management call failed", e);
                ex.sendError(500, "InternalServerException", "Internal error: " + e);
            }
        });
    }
}

package org.tserve.grpc;

import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.pytorch.serve.grpc.management.DescribeModelRequest;
import org.pytorch.serve.grpc.management.ListModelsRequest;
import org.pytorch.serve.grpc.management.ManagementAPIsServiceGrpc;
import org.pytorch.serve.grpc.management.ManagementResponse;
import org.pytorch.serve.grpc.management.RegisterModelRequest;
import org.pytorch.serve.grpc.management.ScaleWorkerRequest;
import org.pytorch.serve.grpc.management.SetDefaultRequest;
import org.pytorch.serve.grpc.management.UnregisterModelRequest;
import org.tserve.config.Compatibility;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.JobResponder;
import org.tserve.wlm.api.ModelDescription;
import org.tserve.wlm.api.RegisterRequest;
import org.tserve.wlm.api.Response;
import org.tserve.wlm.api.StatusResult;
import org.tserve.wlm.api.WlmException;

/**
 * TorchServe's {@code ManagementAPIsService}. As in TorchServe, int fields ≤ 0 and empty strings
 * mean "not given", {@code synchronous} defaults to false, and {@code msg} carries the REST API's
 * text (describe and list: its JSON). Register and unregister need {@code enable_model_api=true}
 * (PERMISSION_DENIED otherwise).
 */
final class ManagementService extends ManagementAPIsServiceGrpc.ManagementAPIsServiceImplBase {
    private final ModelManager models;
    private final boolean modelApiEnabled;

    ManagementService(ModelManager models, boolean modelApiEnabled) {
        this.models = models;
        this.modelApiEnabled = modelApiEnabled;
    }

    @Override
    public void describeModel(DescribeModelRequest req, StreamObserver<ManagementResponse> out) {
        if (!requireName(req.getModelName(), out)) {
            return;
        }
        String version = emptyToNull(req.getModelVersion());
        try {
            List<ModelDescription> ds = models.describe(req.getModelName(), version);
            String customized = null;
            if (req.getCustomized() && !"all".equals(version)) {
                customized = customizedDescribe(req.getModelName(), version);
            }
            reply(out, ManagementJson.describe(ds, customized));
        } catch (WlmException e) {
            out.onError(GrpcStatusMapper.status(e.getStatus(), e.getMessage()).asRuntimeException());
        }
    }

    /** Runs a DESCRIBE job through a worker and returns the handler's body as text. */
    private String customizedDescribe(String name, String version) throws WlmException {
        CompletableFuture<Response> answer = new CompletableFuture<>();
        Job job = Job.describe(name, version, new JobResponder() {
            @Override
            public void onChunk(Response chunk) {
            }

            @Override
            public void onResult(Response r) {
                answer.complete(r);
            }

            @Override
            public void onError(int status, String message) {
                answer.completeExceptionally(new WlmException(status, message));
            }
        });
        models.submit(job);
        try {
            Response r = answer.get(10, TimeUnit.MINUTES);
            if (r.status() >= 400) {
                throw new WlmException(r.status(), r.message());
            }
            return new String(r.body(), StandardCharsets.UTF_8);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof WlmException) {
                throw (WlmException) e.getCause();
            }
            throw new WlmException(500, "Customized describe failed: " + e.getCause());
        } catch (TimeoutException e) {
            throw new WlmException(504, "Customized describe of model " + name + " got no answer");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new WlmException(503, "Server is shutting down");
        }
    }

    @Override
    public void listModels(ListModelsRequest req, StreamObserver<ManagementResponse> out) {
        reply(out, ManagementJson.list(models.list(req.getLimit(), req.getNextPageToken())));
    }

    @Override
    public void registerModel(RegisterModelRequest req, StreamObserver<ManagementResponse> out) {
        if (!modelApiEnabled) {
            denied(out);
            return;
        }
        if (req.getUrl().isEmpty()) {
            out.onError(Status.INVALID_ARGUMENT.withDescription("Parameter url is required.").asRuntimeException());
            return;
        }
        RegisterRequest r = new RegisterRequest(req.getUrl());
        r.modelName = emptyToNull(req.getModelName());
        r.handler = emptyToNull(req.getHandler());
        r.runtime = emptyToNull(req.getRuntime());
        // TorchServe's proto fields; 0 means "not given"
        r.setting("batchSize", positiveOrNull(req.getBatchSize()))
                .setting("maxBatchDelay", positiveOrNull(req.getMaxBatchDelay()))
                .setting("responseTimeout", positiveOrNull(req.getResponseTimeout()))
                .setting("startupTimeout", positiveOrNull(req.getStartupTimeout()));
        r.initialWorkers = positiveOrNull(req.getInitialWorkers());
        r.synchronous = req.getSynchronous();
        status(out, () -> models.register(r));
    }

    @Override
    public void scaleWorker(ScaleWorkerRequest req, StreamObserver<ManagementResponse> out) {
        if (!requireName(req.getModelName(), out)) {
            return;
        }
        int min = req.getMinWorker() > 0 ? req.getMinWorker() : 1;
        int max = req.getMaxWorker() > 0 ? req.getMaxWorker() : min;
        status(out, () -> models.scale(req.getModelName(), emptyToNull(req.getModelVersion()), min, max,
            req.getSynchronous()));
    }

    @Override
    public void setDefault(SetDefaultRequest req, StreamObserver<ManagementResponse> out) {
        if (!requireName(req.getModelName(), out)) {
            return;
        }
        if (req.getModelVersion().isEmpty() && Compatibility.current().setDefaultRequiresVersion()) {
            out.onError(Status.INVALID_ARGUMENT.withDescription("Parameter model_version is required.").asRuntimeException());
            return;
        }
        status(out, () -> models.setDefault(req.getModelName(), req.getModelVersion()));
    }

    @Override
    public void unregisterModel(UnregisterModelRequest req, StreamObserver<ManagementResponse> out) {
        if (!modelApiEnabled) {
            denied(out);
            return;
        }
        if (!requireName(req.getModelName(), out)) {
            return;
        }
        status(out, () -> models.unregister(req.getModelName(), emptyToNull(req.getModelVersion())));
    }

    private interface Call {
        StatusResult run() throws WlmException;
    }

    private static void status(StreamObserver<ManagementResponse> out, Call c) {
        try {
            StatusResult r = c.run();
            if (r.status() >= 200 && r.status() < 300) {
                reply(out, r.message());
            } else {
                out.onError(GrpcStatusMapper.status(r.status(), r.message()).asRuntimeException());
            }
        } catch (WlmException e) {
            out.onError(GrpcStatusMapper.status(e.getStatus(), e.getMessage()).asRuntimeException());
        }
    }

    private static void denied(StreamObserver<ManagementResponse> out) {
        out.onError(Status.PERMISSION_DENIED.withDescription(
            "Model API disabled: registering and unregistering models needs enable_model_api=true "
                + "(config.properties) or --enable-model-api").asRuntimeException());
    }

    private static boolean requireName(String name, StreamObserver<ManagementResponse> out) {
        if (name.isEmpty()) {
            out.onError(Status.INVALID_ARGUMENT.withDescription("Parameter model_name is required.").asRuntimeException());
            return false;
        }
        return true;
    }

    private static void reply(StreamObserver<ManagementResponse> out, String msg) {
        out.onNext(ManagementResponse.newBuilder().setMsg(msg).build());
        out.onCompleted();
    }

    private static String emptyToNull(String s) {
        return s == null || s.isEmpty() ? null : s;
    }

    private static Integer positiveOrNull(int v) {
        return v > 0 ? v : null;
    }
}

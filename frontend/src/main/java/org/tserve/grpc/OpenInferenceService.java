package org.tserve.grpc;

import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.pytorch.serve.grpc.openinference.GRPCInferenceServiceGrpc;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.ModelInferRequest;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.ModelInferResponse;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.ModelMetadataRequest;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.ModelMetadataResponse;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.ModelReadyRequest;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.ModelReadyResponse;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.ServerLiveRequest;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.ServerLiveResponse;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.ServerMetadataRequest;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.ServerMetadataResponse;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.ServerReadyRequest;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.ServerReadyResponse;
import org.tserve.server.ResponseListeners;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.api.Header;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.JobResponder;
import org.tserve.wlm.api.ModelDescription;
import org.tserve.wlm.api.Part;
import org.tserve.wlm.api.Response;
import org.tserve.wlm.api.WlmException;
import org.tserve.wlm.api.WorkerState;

/**
 * The Open Inference Protocol's {@code GRPCInferenceService} (KServe v2 gRPC) on the inference
 * port. ModelInfer sends the request to the handler as KServe v2 JSON (part {@code body},
 * {@code application/json}) and turns its answer back into tensors, so a model served with
 * {@code service_envelope=kservev2} answers REST and gRPC alike.
 */
final class OpenInferenceService extends GRPCInferenceServiceGrpc.GRPCInferenceServiceImplBase {
    private final ModelManager models;
    /** Hears each answer's status (metrics counts them). */
    private final ResponseListeners responses;
    private final String version;

    OpenInferenceService(ModelManager models, String version, ResponseListeners responses) {
        this.responses = responses;
        this.models = models;
        this.version = version;
    }

    @Override
    public void serverLive(ServerLiveRequest request, StreamObserver<ServerLiveResponse> out) {
        out.onNext(ServerLiveResponse.newBuilder().setLive(true).build());
        out.onCompleted();
    }

    @Override
    public void serverReady(ServerReadyRequest request, StreamObserver<ServerReadyResponse> out) {
        out.onNext(ServerReadyResponse.newBuilder().setReady(models.health().ready()).build());
        out.onCompleted();
    }

    @Override
    public void serverMetadata(ServerMetadataRequest request, StreamObserver<ServerMetadataResponse> out) {
        out.onNext(ServerMetadataResponse.newBuilder().setName("tserve").setVersion(version)
            .addExtensions("kserve").addExtensions("kubeflow").addExtensions("binary_tensor_data").build());
        out.onCompleted();
    }

    @Override
    public void modelReady(ModelReadyRequest request, StreamObserver<ModelReadyResponse> out) {
        try {
            boolean ready = false;
            for (ModelDescription d : describe(request.getName(), request.getVersion())) {
                ready |= d.workers().stream().anyMatch(w -> w.state() == WorkerState.READY);
            }
            out.onNext(ModelReadyResponse.newBuilder().setReady(ready).build());
            out.onCompleted();
        } catch (WlmException e) {
            out.onError(GrpcStatusMapper.status(e.getStatus(), e.getMessage()).asRuntimeException());
        }
    }

    @Override
    public void modelMetadata(ModelMetadataRequest request, StreamObserver<ModelMetadataResponse> out) {
        try {
            describe(request.getName(), request.getVersion());
            ModelMetadataResponse.Builder b = ModelMetadataResponse.newBuilder().setName(request.getName()).setPlatform("pytorch");
            for (ModelDescription d : models.describe(request.getName(), "all")) {
                b.addVersions(d.modelVersion());
            }
            out.onNext(b.build());
            out.onCompleted();
        } catch (WlmException e) {
            out.onError(GrpcStatusMapper.status(e.getStatus(), e.getMessage()).asRuntimeException());
        }
    }

    private List<ModelDescription> describe(String name, String v) throws WlmException {
        if (name.isEmpty()) {
            throw new WlmException(400, "Parameter name is required: set the model name.");
        }
        return models.describe(name, v.isEmpty() ? null : v);
    }

    @Override
    public void modelInfer(ModelInferRequest request, StreamObserver<ModelInferResponse> out) {
        InferenceService.SafeObserver<ModelInferResponse> safe = new InferenceService.SafeObserver<>(out);
        CallContext call = CallContext.current();
        if (request.getModelName().isEmpty()) {
            fail(safe, 400, "Parameter model_name is required: set model_name in ModelInferRequest.");
            return;
        }
        byte[] body;
        try {
            body = OipTensors.toJson(request).toString().getBytes(StandardCharsets.UTF_8);
        } catch (IllegalArgumentException e) {
            fail(safe, 400, e.getMessage());
            return;
        }
        JobResponder responder = new JobResponder() {
            @Override
            public void onChunk(Response chunk) {
            }

            @Override
            public void onResult(Response r) {
                InferenceService.setTrailers(call, r);
                if (r.status() >= 400) {
                    fail(safe, r.status(), r.message().isEmpty() ? "Prediction failed" : r.message());
                    return;
                }
                ModelInferResponse resp;
                try {
                    resp = OipTensors.fromJson(new String(r.body(), StandardCharsets.UTF_8), request);
                } catch (RuntimeException e) {
                    fail(safe, 500, "Model " + request.getModelName() + ": " + e.getMessage());
                    return;
                }
                responses.sent(r.status());
                safe.onNext(resp);
                safe.onCompleted();
            }

            @Override
            public void onError(int status, String message) {
                fail(safe, status, message);
            }
        };
        List<Header> headers = List.of(new Header("url_path", ""), new Header("explain", "False"));
        List<Part> parts = List.of(new Part("body", "application/json", body));
        String v = request.getModelVersion().isEmpty() ? null : request.getModelVersion();
        try {
            models.submit(new Job(request.getModelName(), v, headers, parts, responder));
        } catch (WlmException e) {
            fail(safe, e.getStatus(), e.getMessage());
        }
    }

    private void fail(InferenceService.SafeObserver<ModelInferResponse> out, int status, String message) {
        responses.sent(status);
        out.onError(Status.fromCode(GrpcStatusMapper.code(status, message)).withDescription(message).asRuntimeException());
    }
}

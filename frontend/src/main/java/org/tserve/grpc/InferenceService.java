package org.tserve.grpc;

import com.google.gson.GsonBuilder;
import com.google.gson.JsonObject;
import com.google.protobuf.ByteString;
import com.google.protobuf.Empty;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.util.List;
import org.apache.logging.log4j.Logger;
import org.pytorch.serve.grpc.inference.InferenceAPIsServiceGrpc;
import org.pytorch.serve.grpc.inference.PredictionResponse;
import org.pytorch.serve.grpc.inference.PredictionsRequest;
import org.pytorch.serve.grpc.inference.TorchServeHealthResponse;
import org.tserve.server.ResponseListeners;
import org.tserve.util.Logging;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.api.Header;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.JobResponder;
import org.tserve.wlm.api.Response;
import org.tserve.wlm.api.WlmException;

/**
 * TorchServe's {@code InferenceAPIsService}: Ping, Predictions, StreamPredictions (one request, a
 * stream of the handler's pieces) and StreamPredictions2 (a stream of requests of one sequence).
 * The handler's status and headers travel back as trailing metadata ({@code ts-status}, and each
 * header under its lower-cased name); errors close the call with the mapped gRPC code.
 */
final class InferenceService extends InferenceAPIsServiceGrpc.InferenceAPIsServiceImplBase {
    private static final Logger LOG = Logging.logger(InferenceService.class);

    private final ModelManager models;
    /** Hears each answer's status (metrics counts them). */
    private final ResponseListeners responses;

    InferenceService(ModelManager models, ResponseListeners responses) {
        this.responses = responses;
        this.models = models;
    }

    @Override
    public void ping(Empty request, StreamObserver<TorchServeHealthResponse> out) {
        JsonObject o = new JsonObject();
        o.addProperty("status", models.health().text);
        String health = new GsonBuilder().setPrettyPrinting().create().toJson(o) + "\n";
        out.onNext(TorchServeHealthResponse.newBuilder().setHealth(health).build());
        out.onCompleted();
    }

    @Override
    public void predictions(PredictionsRequest request, StreamObserver<PredictionResponse> out) {
        run(request, new SafeObserver<>(out), false);
    }

    @Override
    public void streamPredictions(PredictionsRequest request, StreamObserver<PredictionResponse> out) {
        run(request, new SafeObserver<>(out), true);
    }

    @Override
    public StreamObserver<PredictionsRequest> streamPredictions2(StreamObserver<PredictionResponse> out) {
        return new SequenceStream(models, CallContext.current(), new SafeObserver<>(out), responses);
    }

    /** Unary or server-streaming prediction; ends the call exactly once. */
    private void run(PredictionsRequest request, SafeObserver<PredictionResponse> out, boolean streaming) {
        CallContext call = CallContext.current();
        String model = request.getModelName();
        if (model.isEmpty()) {
            fail(out, call, 400, "Parameter model_name is required: set model_name in PredictionsRequest.");
            return;
        }
        JobResponder responder = new JobResponder() {
            private int chunks;

            @Override
            public void onChunk(Response chunk) {
                if (streaming) {
                    chunks++;
                    out.onNext(prediction(chunk.body()));
                }
            }

            @Override
            public void onResult(Response r) {
                setTrailers(call, r);
                if (r.status() >= 400) {
                    fail(out, call, r.status(), r.message().isEmpty() ? "Prediction failed" : r.message());
                    return;
                }
                // a streaming handler's final frame holds its last piece; an empty one adds nothing
                if (!streaming || chunks == 0 || r.body().length > 0) {
                    out.onNext(prediction(r.body()));
                }
                responses.sent(r.status());
                out.onCompleted();
            }

            @Override
            public void onError(int status, String message) {
                fail(out, call, status, message);
            }
        };
        Job job = JobFactory.create(request, call.requestHeaders(),
                streaming ? List.of(Job.STREAM_HINT) : List.of(), responder);
        try {
            models.submit(job);
        } catch (WlmException e) {
            fail(out, call, e.getStatus(), e.getMessage());
            return;
        }
        out.onClientCancel(() -> cancel(job));
    }

    /**
     * The client cancelled the call (or its deadline passed): a model that takes cancellations
     * (continuous batching) drops the request from its queue or its sequence from the worker's
     * running batch, as REST does when the connection closes.
     */
    static void cancel(Job job) {
        if (job.isCancellable() && job.cancel()) {
            LOG.debug("gRPC call cancelled by the client: request " + job.getId() + " cancelled");
        }
    }

    static PredictionResponse prediction(byte[] body) {
        return PredictionResponse.newBuilder().setPrediction(ByteString.copyFrom(body)).build();
    }

    static void setTrailers(CallContext call, Response r) {
        call.addTrailer("ts-status", String.valueOf(r.status()));
        if (r.contentType() != null && !r.contentType().isEmpty()) {
            call.addTrailer("ts-content-type", r.contentType());
        }
        for (Header h : r.headers()) {
            call.addTrailer(h.name(), h.value());
        }
    }

    private void fail(SafeObserver<PredictionResponse> out, CallContext call, int status, String message) {
        responses.sent(status);
        call.addTrailer("ts-status", String.valueOf(status));
        Status s = GrpcStatusMapper.status(status, message);
        LOG.debug("gRPC prediction failed: " + s.getCode() + " " + message);
        out.onError(s.asRuntimeException());
    }

    /** Ignores writes after the client went away, so a worker thread never sees an exception. */
    static final class SafeObserver<T> {
        private final StreamObserver<T> delegate;
        private volatile boolean closed;
        private boolean cancelled;
        private Runnable onClientCancel;

        SafeObserver(StreamObserver<T> delegate) {
            this.delegate = delegate;
            if (delegate instanceof ServerCallStreamObserver) {
                ((ServerCallStreamObserver<T>) delegate).setOnCancelHandler(this::clientCancelled);
            }
        }

        private void clientCancelled() {
            Runnable r;
            synchronized (this) {
                closed = true;
                cancelled = true;
                r = onClientCancel;
            }
            if (r != null) {
                r.run();
            }
        }

        /** Runs {@code r} when the client cancels the call; at once if it already has. */
        void onClientCancel(Runnable r) {
            boolean now;
            synchronized (this) {
                onClientCancel = r;
                now = cancelled;
            }
            if (now) {
                r.run();
            }
        }

        boolean isClosed() {
            return closed;
        }

        synchronized void onNext(T v) {
            if (!closed) {
                try {
                    delegate.onNext(v);
                } catch (RuntimeException e) {
                    closed = true;
                }
            }
        }

        synchronized void onError(Throwable t) {
            if (!closed) {
                closed = true;
                try {
                    delegate.onError(t);
                } catch (RuntimeException e) {
                    LOG.debug("gRPC call already closed: " + e.getMessage());
                }
            }
        }

        synchronized void onCompleted() {
            if (!closed) {
                closed = true;
                try {
                    delegate.onCompleted();
                } catch (RuntimeException e) {
                    LOG.debug("gRPC call already closed: " + e.getMessage());
                }
            }
        }
    }

    /** Builds a job without the gRPC call's headers (used by {@link SequenceStream}). */
    static Job job(PredictionsRequest req, CallContext call, List<Header> extra, JobResponder r) {
        return JobFactory.create(req, call.requestHeaders(), extra, r);
    }
}

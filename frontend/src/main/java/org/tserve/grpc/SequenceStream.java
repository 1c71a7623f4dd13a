package org.tserve.grpc;

import com.google.protobuf.ByteString;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.pytorch.serve.grpc.inference.PredictionResponse;
import org.pytorch.serve.grpc.inference.PredictionsRequest;
import org.tserve.server.ResponseListeners;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.api.Header;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.JobResponder;
import org.tserve.wlm.api.Response;
import org.tserve.wlm.api.WlmException;

/**
 * StreamPredictions2: the client streams requests of one stateful sequence; each is run after the
 * previous one answered (so the handler sees them in order) and answered with one or more
 * responses carrying the sequence id. A failed request is answered with {@code status} set
 * (google.rpc.Status) and the stream stays open; the call ends after the client half-closes and
 * every request was answered. Requests without a sequence id share one generated
 * {@code ts-seq-<uuid>}, the first one marked {@code ts_request_sequence_start: true}.
 */
final class SequenceStream implements StreamObserver<PredictionsRequest> {
    static final String SEQUENCE_ID = "ts_request_sequence_id";
    static final String SEQUENCE_START = "ts_request_sequence_start";

    private final ModelManager models;
    /** Hears each answer's status (metrics counts them). */
    private final ResponseListeners responses;
    private final CallContext call;
    private final InferenceService.SafeObserver<PredictionResponse> out;
    private final ArrayDeque<PredictionsRequest> pending = new ArrayDeque<>();
    private String generatedId;
    private boolean busy;
    private boolean clientDone;
    /** The request being answered (to cancel it when the client goes away). */
    private Job current;

    SequenceStream(ModelManager models, CallContext call, InferenceService.SafeObserver<PredictionResponse> out,
            ResponseListeners responses) {
        this.responses = responses;
        this.models = models;
        this.call = call;
        this.out = out;
        out.onClientCancel(this::clientGone);
    }

    /** The client cancelled the call: nothing more is sent; the running request is cancelled. */
    private void clientGone() {
        Job job;
        synchronized (this) {
            pending.clear();
            clientDone = true;
            job = current;
        }
        if (job != null) {
            InferenceService.cancel(job);
        }
    }

    @Override
    public synchronized void onNext(PredictionsRequest req) {
        pending.add(req);
        if (!busy) {
            startNext();
        }
    }

    @Override
    public synchronized void onError(Throwable t) {
        pending.clear();
        clientDone = true;
    }

    @Override
    public synchronized void onCompleted() {
        clientDone = true;
        if (!busy && pending.isEmpty()) {
            out.onCompleted();
        }
    }

    /** Called with the lock held. */
    private void startNext() {
        while (!pending.isEmpty() && !out.isClosed()) {
            PredictionsRequest req = pending.poll();
            String seq;
            List<Header> extra = new ArrayList<>();
            if (req.hasSequenceId() && !req.getSequenceId().isEmpty()) {
                seq = req.getSequenceId();
            } else {
                if (generatedId == null) {
                    generatedId = "ts-seq-" + UUID.randomUUID();
                    extra.add(new Header(SEQUENCE_START, "true"));
                }
                seq = generatedId;
            }
            extra.add(new Header(SEQUENCE_ID, seq));
            extra.add(Job.STREAM_HINT);
            if (req.getModelName().isEmpty()) {
                answerError(seq, 400, "Parameter model_name is required: set model_name in PredictionsRequest.");
                continue;
            }
            busy = true;
            try {
                current = InferenceService.job(req, call, extra, responder(seq));
                models.submit(current);
                return;
            } catch (WlmException e) {
                busy = false;
                current = null;
                answerError(seq, e.getStatus(), e.getMessage());
            }
        }
        if (clientDone && pending.isEmpty()) {
            out.onCompleted();
        }
    }

    private JobResponder responder(String seq) {
        return new JobResponder() {
            @Override
            public void onChunk(Response chunk) {
                out.onNext(response(seq, chunk.body()));
            }

            @Override
            public void onResult(Response r) {
                if (r.status() >= 400) {
                    finish(seq, r.status(), r.message().isEmpty() ? "Prediction failed" : r.message());
                    return;
                }
                responses.sent(r.status());
                out.onNext(response(seq, r.body()));
                finish(seq, 0, null);
            }

            @Override
            public void onError(int status, String message) {
                finish(seq, status, message);
            }
        };
    }

    private void finish(String seq, int errorStatus, String message) {
        synchronized (this) {
            if (errorStatus != 0) {
                answerError(seq, errorStatus, message);
            }
            busy = false;
            current = null;
            startNext();
        }
    }

    private void answerError(String seq, int status, String message) {
        responses.sent(status);
        Status.Code code = GrpcStatusMapper.code(status, message);
        out.onNext(PredictionResponse.newBuilder().setSequenceId(seq)
            .setStatus(com.google.rpc.Status.newBuilder().setCode(code.value()).setMessage(message == null ? "" : message))
            .build());
    }

    private static PredictionResponse response(String seq, byte[] body) {
        return PredictionResponse.newBuilder().setSequenceId(seq).setPrediction(ByteString.copyFrom(body)).build();
    }
}

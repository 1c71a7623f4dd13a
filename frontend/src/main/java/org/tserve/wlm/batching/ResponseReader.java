package org.tserve.wlm.batching;

import java.io.EOFException;
import java.io.IOException;
import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.function.LongConsumer;
import java.util.function.Predicate;
import org.apache.logging.log4j.Logger;
import org.tserve.util.Handoff;
import org.tserve.util.Logging;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.Response;
import org.tserve.wlm.api.WlmListener;
import org.tserve.wlm.link.BackendLink;
import org.tserve.wlm.link.BackendStatus;
import org.tserve.wlm.link.RankConnection;
import org.tserve.wlm.protocol.Codec;
import org.tserve.wlm.protocol.Frame;
import org.tserve.wlm.protocol.FrameType;

/**
 * Reads what one worker's ranks send — one thread per rank socket — and matches it to the batches
 * in flight: RESULT and CHUNK answer jobs (rank 0 only), ERROR fails a batch, LOADED and PONG
 * complete what the supervisor and describe wait for, METRICS go to the model's metrics. A socket
 * that closes kills the link, naming the rank. What it tells (jobs answered, handler metrics, its
 * own time) goes to the {@link WlmListener} it is given.
 */
public final class ResponseReader {
    private static final Logger LOG = Logging.logger(ResponseReader.class);
    private final BatchModel model;
    private final WlmListener events;
    private final String name;
    private final String workerId;
    private final InFlightTable inFlight;
    private final BooleanSupplier stopping;
    /** Writes the next queued batch with an answered batch's permit ({@link BatchWriter#dispatchQueued}). */
    private final Predicate<BackendLink> nextBatch;

    /** Frames longer than this are refused (max_response_size): the link dies. */
    private final long maxResponseSize;

    public ResponseReader(BatchModel model, WlmListener events, String name, int port, InFlightTable inFlight,
                          BooleanSupplier stopping, Predicate<BackendLink> nextBatch, long maxResponseSize) {
        this.model = model;
        this.events = events;
        this.maxResponseSize = maxResponseSize;
        this.name = name;
        this.workerId = String.valueOf(port);
        this.inFlight = inFlight;
        this.stopping = stopping;
        this.nextBatch = nextBatch;
    }

    /**
     * Starts a daemon reader thread per rank of {@code link}; {@code startup} hears each answered
     * batch's round trip (the startup timeline keeps the first).
     */
    public void start(BackendLink link, LongConsumer startup) {
        int ranks = link.rankCount();
        for (int r = 0; r < ranks; r++) {
            int rank = r;
            Thread t = new Thread(() -> readLoop(link, rank, startup), name + "-reader" + (ranks > 1 ? "-rank" + r : ""));
            t.setDaemon(true);
            t.start();
        }
    }

    private void readLoop(BackendLink c, int rank, LongConsumer startup) {
        long limit = maxResponseSize;
        RankConnection in = c.rank(rank);
        try {
            while (true) {
                Frame f = in.read(limit);
                if (rank > 0 && (f.type == FrameType.RESULT || f.type == FrameType.CHUNK)) {
                    continue;   // only rank 0 answers inference
                }
                Handoff.Group answers = Handoff.open();   // one hand-off per event loop per frame
                try {
                    dispatch(c, f, rank, startup);
                } finally {
                    answers.close();
                }
            }
        } catch (IOException e) {
            String where = c.rankCount() > 1 ? "rank " + rank : null;
            if (c.alive() && !stopping.getAsBoolean()) {
                LOG.warn(name + ": Worker disconnected" + (where == null ? "" : " (" + where + ")") + ": "
                        + e.getMessage());
            }
            c.die((where == null ? "" : where + ": ")
                    + (e instanceof EOFException ? "worker closed the connection" : e.getMessage()), rank);
        } catch (RuntimeException e) {
            LOG.error(name + ": reader failed", e);
            c.die("frontend reader failed: " + e);
        }
    }

    /** What one frame means: answers, load replies, metrics, errors, pongs. */
    private void dispatch(BackendLink c, Frame f, int rank, LongConsumer startup) throws IOException {
        switch (f.type) {
            case FrameType.LOADED:
                c.loadReplies.get(rank).complete(f);
                break;
            case FrameType.RESULT:
                onResult(c, f, startup);
                break;
            case FrameType.CHUNK:
                onChunk(f);
                break;
            case FrameType.METRICS:
                events.onHandlerMetrics(model.modelName(), model.modelVersion(), workerId, f.text());
                break;
            case FrameType.ERROR:
                onError(c, f, rank);
                break;
            case FrameType.PONG:
                if (rank == 0) {
                    c.onPong(f.text());
                }
                break;
            default:
                LOG.warn(name + ": ignoring unexpected frame " + f);
        }
    }

    private void onResult(BackendLink c, Frame f, LongConsumer startup) throws IOException {
        InFlightBatch b = inFlight.remove(f.batchId);
        if (b == null) {
            LOG.warn(name + ": RESULT for unknown batch " + f.batchId + " ignored");
            return;
        }
        // The next batch goes to the worker first, so that it runs while these answers are sent;
        // else the permit is freed before the answers go out: a client's next request then finds
        // the worker idle and its event loop writes it (dispatchNow), waking no other thread.
        if (!nextBatch.test(c)) {
            c.permits.release();
        }
        List<Response> rs = Codec.decodeResponses(f.body);
        long now = System.nanoTime();
        startup.accept(now - b.jobs.get(0).getDispatchedNanos());
        for (Response r : rs) {
            Job j = b.byId.get(r.requestId());
            if (j == null) {
                LOG.warn(name + ": RESULT names unknown request " + r.requestId());
                continue;
            }
            if (j.result(r)) {
                // the version the request named (null: the default), as the request counter labels it
                events.onJobDone(model.modelName(), j.getVersion(), r.status(),
                        j.getDispatchedNanos() - j.getCreatedNanos(), now - j.getDispatchedNanos());
            }
        }
        for (Job j : b.jobs) {   // answered jobs ignore this: a job is answered once
            j.fail(500, "The worker's answer had no response for request " + j.getId());
        }
        events.onWorkerThreadTime(model.modelName(), model.modelVersion(), name, b.frontendNanos + System.nanoTime() - now);
    }

    private void onChunk(Frame f) throws IOException {
        InFlightBatch b = inFlight.get(f.batchId);
        if (b == null) {
            LOG.warn(name + ": CHUNK for unknown batch " + f.batchId + " ignored");
            return;
        }
        for (Response r : Codec.decodeResponses(f.body)) {
            Job j = b.byId.get(r.requestId());
            if (j != null) {
                j.chunk(r);
            }
        }
    }

    private void onError(BackendLink c, Frame f, int rank) {
        BackendStatus answer = BackendStatus.parse(f.text());
        int status = answer.status();
        String message = answer.message();
        InFlightBatch b = inFlight.remove(f.batchId);
        if (b != null) {
            for (Job j : b.jobs) {
                j.fail(status, message);
            }
            c.permits.release();
        } else if (!c.loadReplies.get(rank).isDone()) {
            c.loadReplies.get(rank).complete(f);
        } else {
            LOG.warn(name + ": worker reported an error: " + message);
        }
    }
}

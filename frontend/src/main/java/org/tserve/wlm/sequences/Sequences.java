package org.tserve.wlm.sequences;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingDeque;
import java.util.function.BiConsumer;
import java.util.function.LongSupplier;
import org.tserve.config.Compatibility;
import org.tserve.config.ModelSettings;
import org.tserve.util.Ids;
import org.tserve.wlm.api.Header;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.WlmException;
import org.tserve.wlm.link.BackendLink;
import org.tserve.wlm.protocol.FrameType;
import org.tserve.wlm.supervision.ServedModel;
import org.tserve.wlm.supervision.Worker;

/**
 * The open sequences of a stateful model (TorchServe's sequenceBatching). A sequence is pinned to
 * one worker — its state lives in that worker's handler — and its requests run there one at a
 * time, in arrival order: the next waits (up to maxSequenceJobQueueSize) until the one before it
 * is answered. With continuous batching several sequences' requests are in the worker at once
 * (each joins the running batch), still one per sequence. A request without {@code
 * ts_request_sequence_id} opens a sequence with a new id (and {@code ts_request_sequence_start:
 * true}); the answer carries the id. A sequence closes after the request that carries {@code
 * ts_request_sequence_end: true}, after an answer whose {@code ts_request_sequence_end} header
 * names it (the handler ended it), after sequenceMaxIdleMSec idle or sequenceTimeoutMSec in all,
 * and with its worker. An id closed by expiry or by its worker's end is remembered (the latest
 * {@link #LOST_IDS_KEPT}): a request naming it answers 503 saying the state is gone, as TorchServe
 * answers a sequence whose state its worker no longer has, so the client learns to start anew.
 * A close while the worker serves is told to it (SEQUENCE_END,
 * docs/protocol.md) so the handler can drop the sequence's state; a request that reuses the id
 * reaches the worker only after that frame.
 */
public final class Sequences {
    static final String ID = "ts_request_sequence_id";
    static final String START = "ts_request_sequence_start";
    static final String END = "ts_request_sequence_end";
    /** How many expired or lost sequence ids are remembered for their 503. */
    static final int LOST_IDS_KEPT = 10000;

    /** One open sequence. Guarded by the enclosing Sequences. */
    private static final class Sequence {
        final String id;
        final Worker worker;
        final ArrayDeque<Job> waiting = new ArrayDeque<>();
        final long opened;
        long lastActive;
        /**
         * The requests at the worker (or on their way there), oldest first; empty while the sequence
         * idles. One, except with compatibility=torchserve-0.12 on a continuous model (see overlaps).
         */
        final ArrayDeque<Job> atWorker = new ArrayDeque<>();
        /** A SEQUENCE_END for an earlier sequence of this id is being written: nothing is sent before it. */
        boolean heldForEnd;
        boolean ending;

        Sequence(String id, Worker worker, long now) {
            this.id = id;
            this.worker = worker;
            this.opened = now;
            this.lastActive = now;
        }

        boolean busy() {
            return !atWorker.isEmpty() || heldForEnd;
        }
    }

    private final ServedModel model;
    private final LongSupplier millisClock;
    private final Map<String, Sequence> open = new LinkedHashMap<>();
    /** Ids closed by expiry or their worker's end, oldest first, with why: they answer 503. */
    private final Map<String, String> gone = new LinkedHashMap<>(16, 0.75f, false) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<String, String> eldest) {
            return size() > LOST_IDS_KEPT;
        }
    };
    /** Ids whose SEQUENCE_END is being written to their worker. */
    private final Set<String> endsInFlight = new HashSet<>();

    /** Writes SEQUENCE_END to a worker (tests pass their own). */
    private final BiConsumer<Worker, String> endWriter;

    public Sequences(ServedModel model, LongSupplier millisClock) {
        this(model, millisClock, null);
    }

    /** @param endWriter writes SEQUENCE_END for (worker, sequence id); null: to the worker's link */
    public Sequences(ServedModel model, LongSupplier millisClock, BiConsumer<Worker, String> endWriter) {
        this.model = model;
        this.millisClock = millisClock;
        this.endWriter = endWriter != null ? endWriter : this::writeEnd;
    }

    /** Routes {@code job} to its sequence's worker, or queues it behind the request running there. */
    public synchronized void submit(Job job, List<? extends Worker> active) throws WlmException {
        ModelSettings s = model.getSettings();
        String id = job.header(ID);
        Sequence seq = id == null ? null : open.get(id);
        if (seq == null && id != null && gone.containsKey(id)) {
            throw new WlmException(503, "Sequence " + id + " of model \"" + model.name + "\" " + gone.get(id)
                    + "; its state is gone: start a new sequence (send the request without ts_request_sequence_id)");
        }
        if (seq == null) {
            if (open.size() >= s.sequenceLimit()) {
                throw new WlmException(503, "Model \"" + model.name + "\" has " + open.size() + " sequences open, its "
                        + "maxNumSequence; retry later (idle ones close after sequenceMaxIdleMSec="
                        + s.sequenceMaxIdleMSec + ") or raise maxNumSequence");
            }
            List<Header> added = new ArrayList<>();
            if (id == null) {
                id = "ts-seq-" + Ids.fastUuid();
                added.add(new Header(ID, id));
            }
            added.add(new Header(START, "true"));
            job.addHeaders(added);
            seq = new Sequence(id, leastLoaded(active), millisClock.getAsLong());
            seq.heldForEnd = endsInFlight.contains(id);
            open.put(id, seq);
        } else if (!goesNow(seq) && seq.waiting.size() >= s.maxSequenceJobQueueSize) {
            throw new WlmException(503, "Sequence " + id + " of model \"" + model.name + "\" already has "
                    + seq.waiting.size() + " request(s) waiting (maxSequenceJobQueueSize=" + s.maxSequenceJobQueueSize
                    + "); send the next one after an answer, or raise maxSequenceJobQueueSize");
        }
        job.addAnswerHeader(new Header(ID, id));
        Sequence pinned = seq;
        job.onDone(() -> answered(pinned, job));
        if (!goesNow(seq)) {
            seq.waiting.add(job);
            job.onCancel(() -> dropWaiting(pinned, job));   // dispatch replaces it when the job goes
        } else {
            send(seq, job);
        }
    }

    /**
     * Whether the next request of {@code seq} may go to the worker now. While one is there it may
     * only with the switch:
     * TorchServe's SequenceContinuousBatching hands it over, which its stateful handlers use to
     * cancel a streaming request (a "-1" request of the same sequence). tserve keeps one request of
     * a sequence at the worker (a conversation's next turn needs the previous answer); with
     * compatibility=torchserve-0.12 on a continuous-batching model, two: the running one and the next.
     */
    private boolean roomAtWorker(Sequence seq) {
        if (seq.heldForEnd) {
            return false;
        }
        return seq.atWorker.isEmpty() || seq.atWorker.size() == 1 && model.getSettings().joinsRunningBatch()
                && Compatibility.current().sequenceRequestsOverlap();
    }

    /** Whether a request submitted now goes to the worker (nothing waits before it and there is room). */
    private boolean goesNow(Sequence seq) {
        return seq.waiting.isEmpty() && roomAtWorker(seq);
    }

    /** A waiting request was cancelled: it leaves the sequence's queue; the running one goes on undisturbed. */
    private synchronized void dropWaiting(Sequence seq, Job job) {
        seq.waiting.remove(job);
    }

    /**
     * A request of {@code seq} was answered (or failed, or cancelled). Only the answer of the
     * request at the worker moves the sequence on: the next one goes, or the sequence idles or
     * closes. A waiting request that ended early just leaves the queue.
     */
    private void answered(Sequence seq, Job job) {
        List<Sequence> ended = new ArrayList<>();
        synchronized (this) {
            if (!seq.atWorker.remove(job)) {
                seq.waiting.remove(job);
                return;
            }
            seq.lastActive = millisClock.getAsLong();
            if ("true".equalsIgnoreCase(job.header(END))) {   // the client's: the sequence ends after this request
                seq.ending = true;
            }
            for (String id : job.resultHeaderValues(END)) {
                endNamed(seq, "true".equalsIgnoreCase(id) ? seq.id : id, ended);
            }
            if (seq.ending) {
                if (seq.atWorker.isEmpty()) {
                    close(seq, ended);
                }
            } else {
                while (!seq.waiting.isEmpty() && roomAtWorker(seq)) {
                    send(seq, seq.waiting.poll());
                }
            }
        }
        tellWorkers(ended);
    }

    /** The handler's answer ended sequence {@code id} ({@code ts_request_sequence_end: <id>[;<id>...]}). */
    private void endNamed(Sequence answering, String id, List<Sequence> ended) {
        Sequence named = open.get(id);
        if (named == null || named.worker != answering.worker) {
            return;   // a handler ends only the sequences its own worker holds
        }
        named.ending = true;
        if (named != answering && !named.busy()) {
            close(named, ended);
        }
    }

    /** Closes {@code seq} (lock held); what waited behind it fails, naming why. */
    private void close(Sequence seq, List<Sequence> ended) {
        open.remove(seq.id, seq);
        endsInFlight.add(seq.id);
        ended.add(seq);
        List<Job> dropped = new ArrayList<>(seq.waiting);
        seq.waiting.clear();
        for (Job j : dropped) {
            j.fail(409, "Sequence " + seq.id + " of model \"" + model.name + "\" ended before this request ran; "
                    + "send it again to start a new sequence");
        }
    }

    /** Writes SEQUENCE_END for each closed sequence (no lock held), then lets a reopened id go on. */
    private void tellWorkers(List<Sequence> ended) {
        for (Sequence seq : ended) {
            endWriter.accept(seq.worker, seq.id);
            synchronized (this) {
                endsInFlight.remove(seq.id);
                Sequence again = open.get(seq.id);
                if (again != null && again.heldForEnd) {
                    again.heldForEnd = false;
                    Job next = again.waiting.poll();
                    if (next != null) {
                        send(again, next);
                    }
                }
            }
        }
    }

    /**
     * Writes SEQUENCE_END to the sequence's worker so its handler can drop the state; nothing when
     * the worker is not serving (the state went with its process). It goes where the model's
     * INFERENCE frames go, so every rank that holds sequence state hears it.
     */
    private void writeEnd(Worker worker, String id) {
        BackendLink c = worker.servingLink();
        if (c == null) {
            return;
        }
        try {
            c.write(FrameType.SEQUENCE_END, 0, id.getBytes(StandardCharsets.UTF_8), model.inferenceToAllRanks());
        } catch (IOException e) {
            c.die("write to worker failed: " + e.getMessage());
        }
    }

    private void send(Sequence seq, Job job) {
        seq.atWorker.add(job);
        // not written yet: a cancel takes it out of the worker's queue (once written, a continuous
        // model's dispatch makes it a CANCEL to the worker)
        BlockingDeque<Job> q = seq.worker.sequenceQueue();
        job.onCancel(() -> q.remove(job));
        if (!q.offerLast(job)) {
            job.fail(503, "Job queue of worker " + seq.worker.getId() + " of model " + model.name + " is full; retry later");
        }
    }

    /** The worker with the fewest open sequences. */
    private Worker leastLoaded(List<? extends Worker> active) throws WlmException {
        Worker best = null;
        int bestCount = Integer.MAX_VALUE;
        for (Worker w : active) {
            int n = 0;
            for (Sequence s : open.values()) {
                n += s.worker == w ? 1 : 0;
            }
            if (n < bestCount) {
                best = w;
                bestCount = n;
            }
        }
        if (best == null) {
            throw new WlmException(503, "Model \"" + model.name + "\" has no worker to serve a new sequence");
        }
        return best;
    }

    /** Closes idle sequences (sequenceMaxIdleMSec) and, when set, those past sequenceTimeoutMSec. */
    public void expire() {
        List<Sequence> ended = new ArrayList<>();
        synchronized (this) {
            if (open.isEmpty()) {
                return;
            }
            ModelSettings s = model.getSettings();
            long now = millisClock.getAsLong();
            for (Sequence seq : new ArrayList<>(open.values())) {
                if (seq.busy()) {
                    continue;
                }
                if (now - seq.lastActive > s.sequenceMaxIdleMSec) {
                    gone.put(seq.id, "expired after sequenceMaxIdleMSec=" + s.sequenceMaxIdleMSec + " ms idle");
                    close(seq, ended);
                } else if (s.sequenceTimeoutMSec > 0 && now - seq.opened > s.sequenceTimeoutMSec) {
                    gone.put(seq.id, "expired after sequenceTimeoutMSec=" + s.sequenceTimeoutMSec + " ms");
                    close(seq, ended);
                }
            }
        }
        tellWorkers(ended);
    }

    /**
     * The worker's process ended: its sequences' state is gone, so they close; what waited for
     * them, and what sat in the worker's own queue, fails naming why.
     */
    public void closeFor(Worker worker, String why) {
        List<Job> lost = new ArrayList<>();
        worker.sequenceQueue().drainTo(lost);
        synchronized (this) {
            for (Iterator<Sequence> it = open.values().iterator(); it.hasNext();) {
                Sequence seq = it.next();
                if (seq.worker == worker) {
                    it.remove();
                    gone.put(seq.id, "lost its state: worker " + worker.getId() + " ended (" + why + ")");
                    seq.atWorker.clear();   // failed with the worker's in-flight batches
                    lost.addAll(seq.waiting);
                    seq.waiting.clear();
                    seq.ending = true;
                }
            }
        }
        for (Job j : lost) {
            j.fail(500, "Sequence lost its state: worker " + worker.getId() + " of model " + model.name + " ended ("
                    + why + "); start a new sequence (omit ts_request_sequence_id)");
        }
    }

    /** Requests waiting behind their sequence's running one (describe's pendingRequests counts them). */
    public synchronized int waitingCount() {
        int n = 0;
        for (Sequence seq : open.values()) {
            n += seq.waiting.size();
        }
        return n;
    }

    synchronized int openCount() {
        return open.size();
    }
}
